package upstream

import (
	"slices"
	"strconv"
)

// virtualNodes is how many places each engine takes on the ring: enough
// that each engine's share of the keys is within a few percent of
// 1/n, few enough that the ring of a dozen engines is a few KB.
const virtualNodes = 160

// ring is a consistent-hash ring over engines, each placed by its id
// (its base URL) alone: every replica of loom given the same URLs, in
// any order, places every key on the same engine, and adding or removing
// an engine moves only the keys it gains or held.
type ring struct {
	points []ringPoint // by pos
}

type ringPoint struct {
	pos    uint64
	engine int // index into the ids the ring was built from
}

func newRing(ids []string) ring {
	r := ring{points: make([]ringPoint, 0, len(ids)*virtualNodes)}
	for i, id := range ids {
		for v := range virtualNodes {
			r.points = append(r.points, ringPoint{pos: hash64(id + "#" + strconv.Itoa(v)), engine: i})
		}
	}
	slices.SortFunc(r.points, func(a, b ringPoint) int {
		switch {
		case a.pos < b.pos:
			return -1
		case a.pos > b.pos:
			return 1
		}
		return a.engine - b.engine
	})
	return r
}

// order appends to dst the n engines in the order the ring meets them
// going clockwise from pos: the key's engine first, then where its keys
// go should it be taken out, and so on.
func (r ring) order(pos uint64, n int, dst []int) []int {
	start, _ := slices.BinarySearchFunc(r.points, pos, func(p ringPoint, pos uint64) int {
		switch {
		case p.pos < pos:
			return -1
		case p.pos > pos:
			return 1
		}
		return 0
	})
	base := len(dst)
	for i := 0; i < len(r.points) && len(dst)-base < n; i++ {
		e := r.points[(start+i)%len(r.points)].engine
		if !slices.Contains(dst[base:], e) {
			dst = append(dst, e)
		}
	}
	return dst
}

// hash64 places a string on the ring: FNV-1a, then a finalizer that
// spreads its bits (FNV alone leaves keys that differ in their last
// bytes near each other), the same on every replica and every run.
func hash64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	// splitmix64's finalizer.
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}
