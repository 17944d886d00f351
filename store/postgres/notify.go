package postgres

import (
	"context"
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

// NewNotifier starts listening for appended events until Close.
func (d *DB) NewNotifier() *Notifier {
	ctx, cancel := context.WithCancel(context.Background())
	n := &Notifier{d: d, log: d.log, subs: map[string]map[chan struct{}]struct{}{}, cancel: cancel, done: make(chan struct{})}
	go n.run(ctx)
	return n
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

// run listens, reconnecting a second after a failure, until ctx ends.
func (n *Notifier) run(ctx context.Context) {
	defer close(n.done)
	for {
		err := n.listen(ctx)
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

func (n *Notifier) listen(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, n.d.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+eventsChannel); err != nil {
		return err
	}
	for {
		note, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		n.signal(note.Payload)
	}
}
