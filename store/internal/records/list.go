package records

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/loomgate/loom/store"
)

// ListResponses implements store.Store's ListResponses once for both
// stores, on q. modelOf is the store's SQL expression of the model in the
// response column (the model is not a column of its own: the object
// holds it, and the console's filter on it is rare enough to read it
// there). The order is created_at then id, both descending, so that a
// cursor is a position whatever was saved since; the created_at index
// serves it.
func ListResponses(ctx context.Context, q Querier, name, modelOf string, rq store.ResponseQuery) ([]*store.Record, bool, error) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if rq.After != "" {
		var createdAt int64
		err := q.QueryRow(ctx, `SELECT created_at FROM responses WHERE id = $1`, rq.After).Scan(&createdAt)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, false, store.ErrUnknownCursor
		}
		if err != nil {
			return nil, false, fmt.Errorf("%s: list responses: cursor: %w", name, err)
		}
		c, id := arg(createdAt), arg(rq.After)
		// created_at <= c bounds the index range; the rest is the
		// position within it.
		where = append(where, "created_at <= "+c+" AND (created_at < "+c+" OR id < "+id+")")
	}
	if rq.Tenant != nil {
		where = append(where, "tenant = "+arg(*rq.Tenant))
	}
	if len(rq.Statuses) > 0 {
		ph := make([]string, len(rq.Statuses))
		for i, s := range rq.Statuses {
			ph[i] = arg(s)
		}
		where = append(where, "status IN ("+strings.Join(ph, ", ")+")")
		if inFlightOnly(rq.Statuses) {
			// The same again as a literal, which the partial index of
			// the responses in flight (responses_leases) matches, so
			// that listing them (the console's live page) reads those
			// few rows rather than the whole table: a bound parameter
			// cannot match an index's WHERE when the query is planned.
			where = append(where, inFlightStatuses)
		}
	}
	if rq.Model != "" {
		where = append(where, modelOf+" = "+arg(rq.Model))
	}
	query := `SELECT id, previous_response_id, created_at, status, response, lease_owner, lease_until, tenant, trace_id, session_key, timeline
		FROM responses`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	size := rq.Size()
	order := "created_at DESC, id DESC"
	if inFlightOnly(rq.Statuses) {
		// Sorted after reading them (they are few): ordered by the
		// bare column, SQLite's planner would rather walk the whole
		// created_at index than read the partial one and sort.
		order = "+created_at DESC, id DESC"
	}
	// One more than the page, to tell whether more follow.
	query += " ORDER BY " + order + " LIMIT " + arg(size+1)

	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, false, fmt.Errorf("%s: list responses: %w", name, err)
	}
	defer rows.Close()
	var out []*store.Record
	for rows.Next() {
		rec := &store.Record{}
		var response, timeline string
		var leaseUntil int64
		if err := rows.Scan(&rec.ID, &rec.PreviousResponseID, &rec.CreatedAt, &rec.Status, &response,
			&rec.LeaseOwner, &leaseUntil, &rec.Tenant, &rec.TraceID, &rec.SessionKey, &timeline); err != nil {
			return nil, false, fmt.Errorf("%s: list responses: %w", name, err)
		}
		if response != "" {
			rec.Response = json.RawMessage(response)
		}
		if timeline != "" {
			rec.Timeline = json.RawMessage(timeline)
		}
		rec.LeaseUntil = LeaseTime(leaseUntil)
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("%s: list responses: %w", name, err)
	}
	more := len(out) > size
	if more {
		out = out[:size]
	}
	return out, more, nil
}

// inFlightStatuses is the predicate of the index of the responses in
// flight (responses_leases, on both stores), as written there.
const inFlightStatuses = "status IN ('queued', 'in_progress')"

// inFlightOnly reports whether statuses are all statuses of a response in
// flight.
func inFlightOnly(statuses []string) bool {
	for _, s := range statuses {
		if s != "queued" && s != "in_progress" {
			return false
		}
	}
	return len(statuses) > 0
}
