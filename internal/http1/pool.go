package http1

import (
	"sync"
	"time"
)

// pool is a Transport's kept connections, oldest first: take reuses the
// newest (the one least likely to have been closed by the server), and a
// timer closes those unused for longer than timeout.
type pool struct {
	max     int
	timeout time.Duration
	check   time.Duration // checkAfter (tests set it to 0)

	mu    sync.Mutex
	conns []*conn
	timer *time.Timer // armed while conns is not empty
}

// checkAfter is how long a connection sits unused before take looks
// whether the server closed it (closedByPeer, one system call): engines
// close idle connections after a few seconds (uvicorn, vLLM's server,
// after 5 s), and a request sent on such a connection fails and is sent
// again. Sooner than that the look would cost every request.
const checkAfter = 500 * time.Millisecond

// take returns the newest kept connection that has not been unused too
// long and was not closed by the server, or nil.
func (p *pool) take() *conn {
	for {
		c, idle := p.pop()
		if c == nil {
			return nil
		}
		if idle < p.check || !closedByPeer(c.nc) {
			return c
		}
		c.nc.Close()
	}
}

// pop takes the newest kept connection, closing those unused past the
// timeout on the way, and says how long it was unused.
func (p *pool) pop() (*conn, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.conns) > 0 {
		c := p.conns[len(p.conns)-1]
		p.conns[len(p.conns)-1] = nil
		p.conns = p.conns[:len(p.conns)-1]
		if idle := time.Since(c.since); idle < p.timeout {
			return c, idle
		}
		c.nc.Close()
	}
	return nil, 0
}

// put keeps c for reuse, or closes it when the pool is full.
func (p *pool) put(c *conn) {
	c.reused, c.since, c.stop = true, time.Now(), nil
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.conns) >= p.max {
		c.nc.Close()
		return
	}
	p.conns = append(p.conns, c)
	if len(p.conns) == 1 {
		if p.timer == nil {
			p.timer = time.AfterFunc(p.timeout, p.expire)
		} else {
			p.timer.Reset(p.timeout)
		}
	}
}

// expire closes the connections unused for timeout, and re-arms the timer
// for the oldest left.
func (p *pool) expire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for n < len(p.conns) && time.Since(p.conns[n].since) >= p.timeout {
		p.conns[n].nc.Close()
		n++
	}
	p.conns = append(p.conns[:0], p.conns[n:]...)
	clear(p.conns[len(p.conns):cap(p.conns)])
	if len(p.conns) > 0 {
		p.timer.Reset(p.timeout - time.Since(p.conns[0].since))
	}
}

// closeAll closes every kept connection.
func (p *pool) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.nc.Close()
	}
	clear(p.conns)
	p.conns = p.conns[:0]
}
