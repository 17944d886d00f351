package bufpool

import "testing"

func TestPoolSizes(t *testing.T) {
	p := &Pool{Min: 1 << 10, Max: 1 << 20}
	for _, tt := range []struct {
		size  int
		taken bool
	}{{10, false}, {1 << 10, true}, {100 << 10, true}, {1 << 20, true}, {1<<20 + 1, false}} {
		b := p.Get(tt.size)
		if len(b) != 0 || cap(b) < tt.size {
			t.Errorf("Get(%d): len %d cap %d", tt.size, len(b), cap(b))
		}
		if got := p.Put(b); got != tt.taken {
			t.Errorf("Put of cap %d took it back: %v, want %v", cap(b), got, tt.taken)
		}
	}
	// A lent buffer smaller than asked for is not handed out.
	p.Put(make([]byte, 0, 2<<10))
	if b := p.Get(4 << 10); cap(b) < 4<<10 {
		t.Errorf("Get(4 KiB) gave cap %d", cap(b))
	}
}
