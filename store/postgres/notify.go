package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// eventsChannel is the PostgreSQL notification channel AppendEvents
// notifies with the response id as payload.
const eventsChannel = "loom_response_events"

// Notifier tells the followers of a response, on this replica, that events
// of it were appended on any replica: it LISTENs on a connection of its own
// (outside the pool) and fans each notification out to the subscribers of
// that response. It implements engine.EventNotifier. A notification missed
// while the connection is re-established is covered by the followers'
// fallback poll.
type Notifier struct {
	d      *DB
	log    *slog.Logger
	mu     sync.Mutex
	subs   map[string]map[chan struct{}]struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// NewNotifier starts listening for appended events until Close. It returns
// once the first LISTEN is in place, so that nothing notified after it
// returns is missed.
func (d *DB) NewNotifier(ctx context.Context) (*Notifier, error) {
	conn, err := listenConn(ctx, d)
	if err != nil {
		return nil, fmt.Errorf("postgres: listen for events: %w", err)
	}
	lctx, cancel := context.WithCancel(context.Background())
	n := &Notifier{d: d, log: d.log, subs: map[string]map[chan struct{}]struct{}{}, cancel: cancel, done: make(chan struct{})}
	go n.run(lctx, conn)
	return n, nil
}

// listenConn opens a connection of its own and LISTENs on it.
func listenConn(ctx context.Context, d *DB) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, d.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+eventsChannel); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return conn, nil
}

// Subscribe returns a channel that receives once events of response id
// were appended since the last receive (notifications are coalesced), and
// the function that ends the subscription.
func (n *Notifier) Subscribe(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	if n.subs[id] == nil {
		n.subs[id] = map[chan struct{}]struct{}{}
	}
	n.subs[id][ch] = struct{}{}
	n.mu.Unlock()
	return ch, func() {
		n.mu.Lock()
		delete(n.subs[id], ch)
		if len(n.subs[id]) == 0 {
			delete(n.subs, id)
		}
		n.mu.Unlock()
	}
}

// Notify wakes the followers of response id on every replica.
func (n *Notifier) Notify(ctx context.Context, id string) error {
	_, err := n.d.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, eventsChannel, id)
	return err
}

// Close stops listening.
func (n *Notifier) Close() {
	n.cancel()
	<-n.done
}

func (n *Notifier) signal(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.subs[id] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// run listens on conn, then on new connections a second after each
// failure, until ctx ends.
func (n *Notifier) run(ctx context.Context, conn *pgx.Conn) {
	defer close(n.done)
	for {
		err := n.listen(ctx, conn)
		conn = nil
		if ctx.Err() != nil {
			return
		}
		n.log.Warn("postgres: event notifications interrupted; reconnecting", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (n *Notifier) listen(ctx context.Context, conn *pgx.Conn) error {
	if conn == nil {
		var err error
		if conn, err = listenConn(ctx, n.d); err != nil {
			return err
		}
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for {
		note, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		n.signal(note.Payload)
	}
}
