package fanout

import (
	"errors"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/drift"
	"github.com/multas/aggregator/sources"
	"github.com/multas/aggregator/sources/mapping"
)

// observeLookup tells Options.Lookups what one lookup attempt read: its
// items, or that the answer was refused. An attempt that got no answer to
// read (a timeout, a connection refused, a 5xx or a 429 that no errors
// rule matched, a request that could not be made) says nothing of the
// mapping and is not told.
func (e *Engine) observeLookup(m Member, op aggregator.Operation, ans sources.Answer, err error) {
	if e.opts.Lookups == nil {
		return
	}
	l := drift.Lookup{Source: m.Source.ID(), Operation: op}
	if err == nil {
		l.Result, l.Items, l.Health = drift.Empty, len(ans.Infractions), ans.Health
		if l.Items > 0 || ans.Health.Mapped > 0 {
			l.Result = drift.Items
		}
		e.opts.Lookups(l)
		return
	}
	var se *sources.Error
	if !errors.As(err, &se) || !answerRead(se) {
		return
	}
	l.Result, l.Items, l.Health = drift.Error, se.Health.Mapped, se.Health
	e.opts.Lookups(l)
}

// answerRead reports whether a failed lookup read the portal's answer: an
// errors rule or the maintenance marker decided it, or the answer, a
// real one, could not be read.
func answerRead(se *sources.Error) bool {
	if _, ok := se.Health.Rule(); ok || errors.Is(se, mapping.ErrMaintenance) {
		return true
	}
	return se.Outcome == aggregator.Unreadable && se.Status != 0 && !errors.Is(se, sources.ErrUnbuildable)
}
