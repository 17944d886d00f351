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

	mu    sync.Mutex
	conns []*conn
	timer *time.Timer // armed while conns is not empty
}

// take returns the newest kept connection that has not been unused too
// long, or nil.
func (p *pool) take() *conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.conns) > 0 {
		c := p.conns[len(p.conns)-1]
		p.conns[len(p.conns)-1] = nil
		p.conns = p.conns[:len(p.conns)-1]
		if time.Since(c.since) < p.timeout {
			return c
		}
		c.nc.Close()
	}
	return nil
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
