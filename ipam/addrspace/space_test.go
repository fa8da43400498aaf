package addrspace

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"

	"go4.org/netipx"
)

func set(t testing.TB, items ...string) *netipx.IPSet {
	t.Helper()
	var b netipx.IPSetBuilder
	for _, it := range items {
		if p, err := netip.ParsePrefix(it); err == nil {
			b.AddPrefix(p)
			continue
		}
		if r, err := netipx.ParseIPRange(it); err == nil {
			b.AddRange(r)
			continue
		}
		b.Add(netip.MustParseAddr(it))
	}
	s, err := b.IPSet()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewSizes(t *testing.T) {
	tests := []struct {
		name             string
		include, exclude []string
		size             uint64
		wantErr          bool
	}{
		{"one range", []string{"172.16.4.200-172.16.4.250"}, nil, 51, false},
		{"range and prefix", []string{"172.16.4.200-172.16.4.250", "172.16.5.0/28"}, []string{"172.16.4.201"}, 51 + 16 - 1, false},
		{"overlapping inputs merge", []string{"10.0.0.0/30", "10.0.0.2-10.0.0.5"}, nil, 6, false},
		{"all excluded", []string{"10.0.0.0/30"}, []string{"10.0.0.0/29"}, 0, true},
		{"ipv6 range", []string{"fd00::10-fd00::1f"}, nil, 16, false},
		{"ipv6 /64 too large", []string{"fd00::/64"}, nil, 0, true},
		{"crosses 64-bit boundary", []string{"fd00::ffff:ffff:ffff:fff0-fd00:0:0:1::f"}, nil, 32, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(set(t, tt.include...), set(t, tt.exclude...))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && s.Size() != tt.size {
				t.Fatalf("size = %d, want %d", s.Size(), tt.size)
			}
		})
	}
}

func TestPickWalksEveryCandidateOnce(t *testing.T) {
	if _, err := New(set(t, "10.0.0.10-10.0.0.12", "fd00::1"), set(t)); err == nil {
		t.Fatal("mixed families must not build one space silently")
	}
	s, err := New(set(t, "10.0.0.10-10.0.0.12", "10.0.1.0/31"), set(t, "10.0.0.11"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.10", "10.0.0.12", "10.0.1.0", "10.0.1.1"}
	for _, w := range want {
		a, err := s.Pick()
		if err != nil {
			t.Fatal(err)
		}
		if a.String() != w {
			t.Fatalf("pick = %s, want %s", a, w)
		}
		s.Mark(a)
	}
	if _, err := s.Pick(); !errors.Is(err, ErrFull) {
		t.Fatalf("pick on full space: err = %v, want ErrFull", err)
	}
	if s.Used() != 4 || s.Free() != 0 {
		t.Fatalf("used=%d free=%d", s.Used(), s.Free())
	}
	s.Unmark(netip.MustParseAddr("10.0.0.12"))
	if a, err := s.Pick(); err != nil || a.String() != "10.0.0.12" {
		t.Fatalf("pick after unmark = %v, %v", a, err)
	}
}

func TestPickDoesNotHandBackJustReleased(t *testing.T) {
	s, err := New(set(t, "10.0.0.0/29"), set(t))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := s.Pick()
	s.Mark(a)
	s.Unmark(a) // released right away
	b, _ := s.Pick()
	if b == a {
		t.Fatalf("cursor did not advance: got %s again", b)
	}
}

func TestMarkOutsideAndTwice(t *testing.T) {
	s, err := New(set(t, "10.0.0.0/30"), set(t))
	if err != nil {
		t.Fatal(err)
	}
	s.Mark(netip.MustParseAddr("10.9.9.9"))
	s.Mark(netip.MustParseAddr("10.0.0.1"))
	s.Mark(netip.MustParseAddr("10.0.0.1"))
	if s.Used() != 1 {
		t.Fatalf("used = %d, want 1", s.Used())
	}
	if !s.IsUsed(netip.MustParseAddr("10.0.0.1")) || s.IsUsed(netip.MustParseAddr("10.0.0.2")) {
		t.Fatal("IsUsed disagrees with Mark")
	}
	if s.Contains(netip.MustParseAddr("10.0.0.4")) || !s.Contains(netip.MustParseAddr("10.0.0.3")) {
		t.Fatal("Contains is wrong at the range edge")
	}
	s.Reset()
	if s.Used() != 0 {
		t.Fatal("reset left addresses used")
	}
}

func TestIPv6AcrossCarry(t *testing.T) {
	s, err := New(set(t, "fd00::ffff:ffff:ffff:fffe-fd00:0:0:1::1"), set(t))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 4 {
		a, err := s.Pick()
		if err != nil {
			t.Fatal(err)
		}
		s.Mark(a)
		got = append(got, a.String())
	}
	want := []string{"fd00::ffff:ffff:ffff:fffe", "fd00::ffff:ffff:ffff:ffff", "fd00:0:0:1::", "fd00:0:0:1::1"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("pick %d = %s, want %s", i, got[i], want[i])
		}
	}
}

// fullSlash16 builds a /16 space with 95% of its addresses used at random.
func fullSlash16(b testing.TB) *Space {
	s, err := New(set(b, "10.20.0.2-10.20.255.253"), set(b))
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	target := s.Size() * 95 / 100
	base := netip.MustParseAddr("10.20.0.2")
	for s.Used() < target {
		s.Mark(add(base, r.Uint64N(s.Size())))
	}
	return s
}

// BenchmarkPick95PercentFullSlash16 is the free-address pick on a 95%-full
// /16, the pool shape the design budgets at ≤ 1 ms per pick.
func BenchmarkPick95PercentFullSlash16(b *testing.B) {
	s := fullSlash16(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		a, err := s.Pick()
		if err != nil {
			b.Fatal(err)
		}
		// Keep the space at 95%: take one, free another, as bookings and
		// releases interleave in a running cluster.
		s.Mark(a)
		s.Unmark(a)
	}
}

// BenchmarkMarkSlash16 is the cost of loading a /16's occupancy (one Mark
// per booked address) after a listing.
func BenchmarkMarkSlash16(b *testing.B) {
	s := fullSlash16(b)
	base := netip.MustParseAddr("10.20.0.2")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		s.Reset()
		for i := range uint64(62258) {
			s.Mark(add(base, i))
		}
	}
}

// Seek moves where picking goes on, across ranges, and wraps around the
// end; a seek past the size lands modulo it.
func TestSeek(t *testing.T) {
	s, err := New(set(t, "10.0.0.10-10.0.0.12", "10.0.1.0/31"), set(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		seek uint64
		want string
	}{{3, "10.0.1.0"}, {1, "10.0.0.11"}, {5 + 4, "10.0.1.1"}} {
		s.Seek(tc.seek)
		if a, err := s.Pick(); err != nil || a.String() != tc.want {
			t.Fatalf("seek %d: pick = %v, %v; want %s", tc.seek, a, err, tc.want)
		}
	}
	s.Mark(netip.MustParseAddr("10.0.1.1"))
	s.Seek(4)
	if a, err := s.Pick(); err != nil || a.String() != "10.0.0.10" {
		t.Fatalf("seek to a used last candidate: pick = %v, %v; want the wrap to 10.0.0.10", a, err)
	}
}

// A pool that filled up in order: its first half is used. A cursor moved to
// a random candidate lands in the used half as often as it is used, and the
// search from there stops at the end of the half, the frontier, where the
// other replica picks; SeekFree lands on a free candidate.
func TestSeekFreeAvoidsTheFrontier(t *testing.T) {
	newHalfUsed := func() *Space {
		s, err := New(set(t, "10.0.0.0/24"), set(t))
		if err != nil {
			t.Fatal(err)
		}
		a := netip.MustParseAddr("10.0.0.0")
		for range 128 {
			s.Mark(a)
			a = a.Next()
		}
		return s
	}
	frontier := netip.MustParseAddr("10.0.0.128")
	for _, tc := range []struct {
		name    string
		seek    func(s *Space, rand func(uint64) uint64)
		atMost  int
		atLeast int
	}{
		{"SeekFree", func(s *Space, rand func(uint64) uint64) { s.SeekFree(rand) }, 5, 0},
		// The seek before: half the draws end at the frontier.
		{"Seek", func(s *Space, rand func(uint64) uint64) { s.Seek(rand(s.Size())) }, 100, 35},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 7))
			hits := 0
			for range 100 {
				s := newHalfUsed()
				tc.seek(s, rng.Uint64N)
				a, err := s.Pick()
				if err != nil {
					t.Fatal(err)
				}
				if a == frontier {
					hits++
				}
			}
			if hits > tc.atMost || hits < tc.atLeast {
				t.Fatalf("%d of 100 seeks ended at the frontier, want %d to %d", hits, tc.atLeast, tc.atMost)
			}
		})
	}
}
