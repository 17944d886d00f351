package sqlite

import (
	"context"
	"strings"
	"testing"

	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/store/internal/records"
)

// planQuerier runs no query: it records SQLite's plan of each one.
type planQuerier struct {
	querier
	t     *testing.T
	plans []string
}

func (p *planQuerier) Query(ctx context.Context, query string, args ...any) (records.Rows, error) {
	rows, err := p.q.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		p.t.Fatalf("explain %s: %v", query, err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			p.t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	p.plans = append(p.plans, strings.Join(plan, "; "))
	return p.querier.Query(ctx, "SELECT 1 WHERE 0")
}

// TestListInFlightUsesItsIndex: listing the responses in flight (the
// console's live page) reads them through the partial index of the
// responses in flight, not by scanning every response stored.
func TestListInFlightUsesItsIndex(t *testing.T) {
	d := openTest(t, Memory)
	p := &planQuerier{querier: querier{d.db}, t: t}
	for _, statuses := range [][]string{{"in_progress"}, {"queued"}, {"queued", "in_progress"}} {
		p.plans = nil
		if _, _, err := records.ListResponses(context.Background(), p, "sqlite", `json_extract(response, '$.model')`,
			store.ResponseQuery{Statuses: statuses, Limit: 100}); err != nil && !strings.Contains(err.Error(), "scan") {
			t.Fatal(err)
		}
		if len(p.plans) != 1 || !strings.Contains(p.plans[0], "responses_leases") {
			t.Errorf("statuses %v: the plan %q does not read the index of the responses in flight", statuses, p.plans)
		}
	}
}
