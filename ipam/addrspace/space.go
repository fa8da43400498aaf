package addrspace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"math/bits"
	"net/netip"
	"sort"

	"go4.org/netipx"
)

// MaxSize bounds the number of candidate addresses of one Space. Pools that
// pick their own addresses keep one bit per candidate in memory; a pool wider
// than this (an IPv6 /64 without ranges) must let IPAM choose instead.
const MaxSize = 1 << 22

// ErrFull is returned by Pick when every candidate address is used.
var ErrFull = errors.New("no free address")

// Space is the set of candidate addresses of a pool and the subset of them in
// use. It is not safe for concurrent use; callers guard it.
type Space struct {
	ranges []span   // sorted, disjoint
	size   uint64   // number of candidates
	used   []uint64 // bitmap over candidate indexes
	nused  uint64   // population count of used
	next   uint64   // cursor: where the next Pick starts looking
}

// span is one contiguous range of candidates and the index of its first address.
type span struct {
	r     netipx.IPRange
	first uint64
	size  uint64
}

// New builds the candidate set: include minus exclude. Both are sets of ranges
// of one address family. It fails when the result is empty or larger than MaxSize.
func New(include, exclude *netipx.IPSet) (*Space, error) {
	var b netipx.IPSetBuilder
	b.AddSet(include)
	b.RemoveSet(exclude)
	set, err := b.IPSet()
	if err != nil {
		return nil, err
	}
	s := &Space{}
	for _, r := range set.Ranges() {
		if len(s.ranges) > 0 && r.From().Is4() != s.ranges[0].r.From().Is4() {
			return nil, errors.New("the ranges mix IPv4 and IPv6 addresses; a pool has one family")
		}
		n, ok := rangeSize(r)
		if !ok || s.size+n > MaxSize {
			return nil, fmt.Errorf("the ranges hold more than %d addresses; narrow them or leave ranges empty to let IPAM choose", MaxSize)
		}
		s.ranges = append(s.ranges, span{r: r, first: s.size, size: n})
		s.size += n
	}
	if s.size == 0 {
		return nil, errors.New("the ranges leave no address to hand out")
	}
	s.used = make([]uint64, (s.size+63)/64)
	return s, nil
}

// rangeSize is the number of addresses in r, false when it exceeds MaxSize.
func rangeSize(r netipx.IPRange) (uint64, bool) {
	from, to := r.From().As16(), r.To().As16()
	d := new(big.Int).Sub(new(big.Int).SetBytes(to[:]), new(big.Int).SetBytes(from[:]))
	d.Add(d, big.NewInt(1))
	if !d.IsUint64() || d.Uint64() > MaxSize {
		return 0, false
	}
	return d.Uint64(), true
}

// Size is the number of candidate addresses.
func (s *Space) Size() uint64 { return s.size }

// Used is the number of candidate addresses marked used.
func (s *Space) Used() uint64 { return s.nused }

// Free is the number of candidate addresses not marked used.
func (s *Space) Free() uint64 { return s.size - s.nused }

// Contains reports whether a is a candidate address.
func (s *Space) Contains(a netip.Addr) bool {
	_, ok := s.index(a)
	return ok
}

// IsUsed reports whether a is a candidate marked used.
func (s *Space) IsUsed(a netip.Addr) bool {
	i, ok := s.index(a)
	return ok && s.used[i/64]&(1<<(i%64)) != 0
}

// Mark records a as used. Addresses outside the space are ignored: the
// occupancy of a whole subnet is fed in, and only the pool's part matters.
func (s *Space) Mark(a netip.Addr) {
	if i, ok := s.index(a); ok && s.used[i/64]&(1<<(i%64)) == 0 {
		s.used[i/64] |= 1 << (i % 64)
		s.nused++
	}
}

// Unmark records a as free again.
func (s *Space) Unmark(a netip.Addr) {
	if i, ok := s.index(a); ok && s.used[i/64]&(1<<(i%64)) != 0 {
		s.used[i/64] &^= 1 << (i % 64)
		s.nused--
	}
}

// Reset marks every candidate free.
func (s *Space) Reset() {
	clear(s.used)
	s.nused = 0
}

// Pick returns a free candidate without marking it. It searches from a
// cursor that advances past each answer, so an address released a moment ago
// is not handed straight back out while others are free: a stale route or
// ARP entry elsewhere would otherwise point at its new holder.
func (s *Space) Pick() (netip.Addr, error) {
	if s.nused >= s.size {
		return netip.Addr{}, ErrFull
	}
	i, ok := s.nextFree(s.next)
	if !ok {
		i, ok = s.nextFree(0)
	}
	if !ok {
		return netip.Addr{}, ErrFull
	}
	s.next = (i + 1) % s.size
	return s.addr(i), nil
}

// Seek moves the cursor to candidate i (modulo the size): the next Pick
// searches from there. Two processes picking from the same pool follow the
// same order from the same cursor and collide on every address until one
// of them seeks elsewhere.
func (s *Space) Seek(i uint64) {
	if s.size > 0 {
		s.next = i % s.size
	}
}

// SeekFree moves the cursor to a free candidate drawn at random (rand
// returns a number in [0, n)), trying a few draws: in a pool filled in
// order, a cursor at a random candidate would land among the used ones
// as often as they are, and the search from there reach the end of their
// run, where the other replica picks. Without a free draw it seeks to
// the last one.
func (s *Space) SeekFree(rand func(n uint64) uint64) {
	if s.size == 0 {
		return
	}
	for range 32 {
		i := rand(s.size)
		s.next = i
		if s.used[i/64]&(1<<(i%64)) == 0 {
			return
		}
	}
}

// nextFree finds the first clear bit at or after from.
func (s *Space) nextFree(from uint64) (uint64, bool) {
	for w := from / 64; w < uint64(len(s.used)); w++ {
		word := ^s.used[w]
		if w == from/64 {
			word &= ^uint64(0) << (from % 64)
		}
		if word == 0 {
			continue
		}
		i := w*64 + uint64(bits.TrailingZeros64(word))
		if i >= s.size {
			return 0, false
		}
		return i, true
	}
	return 0, false
}

// index maps an address to its candidate index.
func (s *Space) index(a netip.Addr) (uint64, bool) {
	a = a.Unmap()
	k := sort.Search(len(s.ranges), func(k int) bool { return !s.ranges[k].r.To().Less(a) })
	if k == len(s.ranges) || !s.ranges[k].r.Contains(a) {
		return 0, false
	}
	return s.ranges[k].first + offset(s.ranges[k].r.From(), a), true
}

// addr maps a candidate index back to its address.
func (s *Space) addr(i uint64) netip.Addr {
	k := sort.Search(len(s.ranges), func(k int) bool { return s.ranges[k].first+s.ranges[k].size > i })
	return add(s.ranges[k].r.From(), i-s.ranges[k].first)
}

// offset is a-from for two addresses of one family less than MaxSize apart:
// the difference of the low 64 bits, taken modulo 2^64, is then exact.
func offset(from, a netip.Addr) uint64 {
	f, t := from.As16(), a.As16()
	return binary.BigEndian.Uint64(t[8:]) - binary.BigEndian.Uint64(f[8:])
}

// add returns a+n for n less than MaxSize.
func add(a netip.Addr, n uint64) netip.Addr {
	b := a.As16()
	lo := binary.BigEndian.Uint64(b[8:])
	sum := lo + n
	binary.BigEndian.PutUint64(b[8:], sum)
	if sum < lo { // carry into the high half
		binary.BigEndian.PutUint64(b[:8], binary.BigEndian.Uint64(b[:8])+1)
	}
	out := netip.AddrFrom16(b)
	if a.Is4() {
		return out.Unmap()
	}
	return out
}
