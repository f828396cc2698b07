-- Peek: the breaker as it stands, for a replica refreshing its view (and
-- writing it back if Redis lost it); nothing else changes.
-- Returns reply(-1, -1).
fetch(STATE)
save()
return reply(-1, -1)
