// Copied next to the types openapi-typescript generates from
// api/openapi.yaml (api.ts) and compiled with them, tsc --strict, by
// api/nodetools_test.go: it reads members of the answers as an integrator
// would, and asserts the exact type of each, so that it compiles only
// while every member is concrete (an `any` would satisfy a plain read,
// an `unknown` would not).
import type { components, paths } from "./api";

type Schemas = components["schemas"];

// Exact is true only when A and B are the same type (any and unknown
// included: neither is the same as string).
type Exact<A, B> =
  (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
function exact<A, B>(ok: Exact<A, B>): Exact<A, B> {
  return ok;
}

type InvalidParam = Schemas["InvalidQueryProblem"]["invalid_params"][number];
type SourceEntry = Schemas["NoSourceAvailableProblem"]["sources"][number];
type Unavailable =
  paths["/v1/infractions"]["get"]["responses"][503]["content"]["application/problem+json"];

export const checks = [
  exact<InvalidParam["name"], string>(true),
  exact<InvalidParam["reason"], string>(true),
  exact<Schemas["Problem"]["status"], number>(true),
  exact<Schemas["Problem"]["retry_after"], number | undefined>(true),
  exact<Schemas["Problem"]["request_id"], string | undefined>(true),
  exact<NonNullable<SourceEntry["problem"]>["type"], string>(true),
  exact<SourceEntry["status"], "succeeded" | "failed" | "skipped">(true),
  exact<SourceEntry["duration_ms"], number | undefined>(true),
  exact<Schemas["QueryEcho"], { domain?: string; id?: string }>(true),
  exact<Schemas["Infraction"]["amount"], string | undefined>(true),
  exact<Unavailable, Schemas["NoSourceAvailableProblem"] | Schemas["OverloadedProblem"]>(true),
  exact<Schemas["OverloadedProblem"]["retry_after"], number>(true),
  exact<Schemas["AsyncQuery"]["completed_at"], string | null | undefined>(true),
  exact<Schemas["Breaker"]["last_transition"], Schemas["Event"] | null>(true),
  exact<Schemas["Breaker"]["window"]["ratio"], number>(true),
  exact<Schemas["Breaker"]["open_until"], string | null>(true),
  exact<Schemas["SourceActivity"]["pause"], Schemas["SourcePause"] | null>(true),
  exact<Schemas["SourceActivity"]["outcomes"]["skipped_open"], number | undefined>(true),
  exact<Schemas["BreakerHistory"]["segments"][number]["state"], Schemas["BreakerState"]>(true),
  exact<Schemas["BreakerStateSeconds"]["half_open"], number>(true),
  exact<Schemas["BreakerSettings"]["failure_statuses"], number[]>(true),
  exact<Schemas["Event"]["kind"], "store" | "mapping" | undefined>(true),
  exact<Schemas["Event"]["added"], string[] | undefined>(true),
  exact<NonNullable<NonNullable<Schemas["Event"]["unmapped"]>[string]>["missing"], number | undefined>(true),
  exact<Schemas["SourceActivity"]["mapping"]["items"], number>(true),
  exact<Schemas["SourceMapping"]["shape_changed_at"], string | null>(true),
  exact<Schemas["SourceMapping"]["unknown_statuses"][number]["text"], string>(true),
  exact<Schemas["UnknownStatus"]["count"], number>(true),
  exact<Schemas["Event"]["operation"], "by_domain" | "by_id" | "voucher" | "">(true),
  exact<NonNullable<Schemas["Event"]["evidence"]>["retry_after"], number | undefined>(true),
  exact<Schemas["DLQEntry"]["payload"], Schemas["WebhookEvent"] | Schemas["WatchEvent"]>(true),
  exact<Schemas["DLQEntry"]["watch_id"], string | undefined>(true),
  exact<Schemas["Watch"]["last_check_at"], string | null>(true),
  exact<Schemas["Watch"]["interval"], string>(true),
  exact<Schemas["WatchSource"]["problem"], Schemas["Problem"] | null>(true),
  exact<Schemas["WatchSource"]["last_success_at"], string | null>(true),
  exact<Schemas["WatchList"]["next_cursor"], string | null>(true),
  exact<Schemas["WatchEventData"]["changes"]["changed"][number]["after"], Schemas["Infraction"]>(true),
  exact<Schemas["WatchEventData"]["baseline_sources"], string[]>(true),
  exact<NonNullable<Schemas["Readiness"]["checks"]>[string]["status"], Schemas["CheckStatus"]>(true),
  exact<NonNullable<Schemas["CoverageSource"]["operations"]["by_domain"]>["available"], boolean>(true),
  exact<Schemas["StreamEvent"], Schemas["SourceEvent"] | Schemas["SummaryEvent"]>(true),
  exact<Schemas["SourceEvent"]["type"], "source">(true),
  exact<Schemas["SourceEvent"]["infractions"], Schemas["Infraction"][]>(true),
  exact<Schemas["SummaryEvent"]["summary"], Schemas["Summary"]>(true),
  exact<NonNullable<Schemas["SummaryEvent"]["problem"]>["type"], string>(true),
];

// What a browser's EventSource (or an NDJSON reader) does with each event.
export function describeEvent(ev: Schemas["StreamEvent"]): string {
  if (ev.type === "source") {
    return `${ev.source}: ${ev.status}, ${ev.infractions.length} infractions`;
  }
  return `${ev.summary.succeeded} of ${ev.summary.total} sources succeeded`;
}

// What an integrator writes: the first bad parameter of a 400, and why each
// source failed in a 503.
export function firstBadParam(p: Schemas["InvalidQueryProblem"]): string {
  return `${p.invalid_params[0].name}: ${p.invalid_params[0].reason}`;
}

export function whyUnavailable(p: Unavailable): string[] {
  if ("sources" in p) {
    return p.sources.map((s) => s.problem?.type ?? s.status);
  }
  return [`${p.type}, retry after ${p.retry_after}s`];
}

// A DLQ entry's payload is a query's delivery or a watch's, told apart by
// its type.
export function dlqResult(e: Schemas["DLQEntry"]): Schemas["Result"] | null {
  return e.payload.type === "infractions.changed" ? null : e.payload.data.result;
}

export function lastChange(b: Schemas["Breaker"]): string {
  const e = b.last_transition;
  return e === null ? "never" : `${e.time}: ${e.from} → ${e.to} (${e.reason})`;
}
