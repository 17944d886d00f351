package engine

import (
	"sync"

	"github.com/loomgate/loom/responses"
)

// Default bounds on the responses running at once (Options.MaxRunning,
// Options.MaxRunningPerTenant). An idle open stream holds about 45 KB, so
// the global bound keeps a flood of slow streams to tens of MB; the
// per-tenant bound keeps one tenant from taking all of it.
const (
	defaultMaxRunning          = 1024
	defaultMaxRunningPerTenant = 256
)

// Default bounds on the history a continuation loads
// (Options.MaxHistoryItems, Options.MaxHistoryBytes): past them a request
// of a hundred bytes made the server decode half a million items (4-6
// CPU-seconds, 0.9 GB). 64 MiB is twice the largest request body by
// default: a conversation may outgrow what one request can send, up to a
// point.
const (
	defaultMaxHistoryItems = 100_000
	defaultMaxHistoryBytes = 64 << 20
)

// admission counts the responses running at once, in all and by tenant,
// and refuses one past either bound. A refusal costs nothing: it comes
// before the request's history is loaded or the model is called.
type admission struct {
	max, perTenant int

	mu       sync.Mutex
	running  int
	byTenant map[string]int
}

// admit takes a place for a response of tenant, or returns the 429 that
// says which bound was reached. The caller gives the place back with
// leave.
func (a *admission) admit(tenant string) *responses.APIError {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.running >= a.max:
		return tooManyRunning("this server is running as many responses as it allows (%d); retry shortly", a.max)
	case a.byTenant[tenant] >= a.perTenant:
		return tooManyRunning("this tenant has as many responses running at once as it may (%d); retry when one has finished", a.perTenant)
	}
	if a.byTenant == nil {
		a.byTenant = map[string]int{}
	}
	a.running++
	a.byTenant[tenant]++
	return nil
}

// leave gives back the place admit took for a response of tenant.
func (a *admission) leave(tenant string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.running--
	if a.byTenant[tenant]--; a.byTenant[tenant] <= 0 {
		delete(a.byTenant, tenant)
	}
}

func tooManyRunning(format string, limit int) *responses.APIError {
	e := responses.BadRequest("", format, limit)
	e.Kind, e.Type, e.Code = responses.ERateLimited, responses.ErrRateLimit, "too_many_running_responses"
	return e
}
