package async

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// deliver makes the next attempt of d, unless its origin's breaker holds it
// back (retained: no attempt consumed) or its release pace asks it to wait.
func (m *Manager) deliver(d *Delivery) {
	ctx := m.ctx
	now := m.clock.Now()
	o := origin(d.CallbackURL)
	if w := m.origins.blocked(o, now); w > 0 {
		m.hold(ctx, d, now, w)
		return
	}
	if d.Retained || d.Attempts > 0 {
		// Released work: paced per origin, never a burst.
		if w := m.pace.admit("origin\x00"+o, &d.Slot, now); w > 0 {
			d.Due = d.Slot
			m.storeError("rescheduling a delivery", m.store.SaveDelivery(ctx, d))
			return
		}
	}
	probe, ok := m.origins.allow(o, now)
	if !ok {
		m.hold(ctx, d, now, m.origins.blocked(o, now))
		return
	}
	err := m.post(ctx, d, now)
	if ctx.Err() != nil {
		// Shutting down: the attempt does not count; the delivery is due
		// again at once for whoever runs next.
		m.origins.abort(o, probe)
		d.Due = now
		m.storeError("releasing a delivery", m.store.SaveDelivery(context.WithoutCancel(ctx), d))
		return
	}
	end := m.clock.Now()
	d.Attempts++
	recovered, opened := m.origins.done(o, probe, err == nil, end)
	log := m.opts.Logger.With("delivery_id", d.ID, "webhook_id", d.MessageID, "origin", o, "attempt", d.Attempts)
	if d.WatchID != "" {
		log = log.With("watch_id", d.WatchID)
	} else {
		log = log.With("query_id", d.QueryID)
	}
	if opened {
		m.pace.reset("origin\x00" + o)
		log.Warn("callback origin breaker opened: deliveries retained", "open_for", m.origins.openFor.String())
	}
	if err == nil {
		m.storeError("forgetting a delivery", m.store.DeleteDelivery(ctx, d))
		m.delivered(OutcomeDelivered)
		log.Info("webhook delivered")
		if recovered {
			log.Info("callback origin recovered: retained deliveries released")
			m.poke()
		}
		return
	}
	d.LastError = err.Error()
	if d.Attempts >= m.opts.MaxAttempts {
		e := DLQEntry{ID: d.ID, QueryID: d.QueryID, WatchID: d.WatchID, CallbackURL: d.CallbackURL, Attempts: d.Attempts,
			LastError: d.LastError, CreatedAt: d.CreatedAt, FailedAt: end, Payload: d.Payload, MessageID: d.MessageID,
			Trace: d.Trace, Signer: d.Signer, Sealed: d.Sealed}
		if err := m.store.DeadLetter(ctx, d, e); err != nil {
			m.storeError("dead-lettering a delivery", err)
			return
		}
		m.delivered(OutcomeDeadLettered)
		log.Error("webhook delivery failed its last attempt: moved to the dead letter queue", "err", d.LastError)
		m.reportDLQ(ctx)
		return
	}
	d.Due = end.Add(delay(m.opts.Backoff, d.Attempts))
	if until, open := m.origins.pausedUntil(o); open && until.Before(d.Due) {
		// This failure tripped the origin's breaker, or was its probe:
		// the delivery is now retained by the breaker, whose pause (not
		// its own backoff) says when it is looked at again, so that the
		// whole backlog goes soon after the receiver recovers.
		d.Due = until
	}
	m.storeError("rescheduling a delivery", m.store.SaveDelivery(ctx, d))
	m.delivered(OutcomeFailed)
	log.Warn("webhook delivery failed: will retry", "err", d.LastError, "retry_in", d.Due.Sub(end).String())
}

// hold retains d while its origin's breaker is open: no attempt is
// consumed, and it is looked at again after wait.
func (m *Manager) hold(ctx context.Context, d *Delivery, now time.Time, wait time.Duration) {
	if wait <= 0 {
		wait = m.opts.Poll
	}
	if !d.Retained {
		d.Retained = true
		m.delivered(OutcomeRetained)
	}
	d.Slot = time.Time{} // it will ask for a release slot when it may go
	d.Due = now.Add(wait)
	m.storeError("retaining a delivery", m.store.SaveDelivery(ctx, d))
}

// post makes one attempt: a signed POST that succeeds with a 2xx within
// the timeout. The error says why not, without the URL. Its client span
// starts a trace of its own, linked to the request that created the query.
func (m *Manager) post(ctx context.Context, d *Delivery, at time.Time) error {
	body := d.Payload
	if d.Sealed != nil {
		var err error
		if body, err = m.open(d.MessageID, d.Sealed); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(d.Trace.link(ctx), m.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.CallbackURL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("invalid callback URL")
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "multas-aggregator-webhooks/1")
	h.Set(HeaderID, d.MessageID)
	h.Set(HeaderTimestamp, strconv.FormatInt(at.Unix(), 10))
	if key := m.signingKey(d.Signer); key != nil {
		h.Set(HeaderSignature, Sign(key, d.MessageID, at, body))
	}
	resp, err := m.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("no answer within %s", m.opts.Timeout)
		}
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}
