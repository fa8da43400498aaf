package ipam

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration written as "90m", "24h" or "7d". It remembers
// whether the file set it, so that an explicit "0" is not a default.
// +schema: {"type": "string", "pattern": "^([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$|^[0-9]+d$"}
type Duration struct {
	time.Duration
	set bool
}

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		// An unquoted 0 (YAML's number) is the one number that says a
		// duration without a unit: none.
		var n json.Number
		if json.Unmarshal(b, &n) == nil && n.String() == "0" {
			d.Duration, d.set = 0, true
			return nil
		}
		return fmt.Errorf("a duration is a string such as \"24h\" or \"7d\" (a bare number is read only as 0)")
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration, d.set = v, true
	return nil
}

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// ParseDuration accepts Go durations and a whole number of days ("7d").
// Kept rather than prometheus/common/model.ParseDuration, which refuses Go
// forms pool files may hold ("1.5h", "1h30m0.5s", and "-1h", which
// Validate reports as negative rather than as unreadable).
func ParseDuration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		switch {
		case errors.Is(err, strconv.ErrRange), err == nil && (n > maxDays || n < -maxDays):
			return 0, outOfRange(s)
		case err != nil || n < 0:
			return 0, fmt.Errorf("duration %q: days must be a whole number such as \"7d\"", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		// time.ParseDuration words an overflow as it words a typo.
		if goDuration.MatchString(s) {
			return 0, outOfRange(s)
		}
		return 0, fmt.Errorf("duration %q: use a form such as \"90m\", \"24h\" or \"7d\"", s)
	}
	return v, nil
}

// maxDays is the longest whole number of days a time.Duration holds;
// more used to wrap around silently ("213504d" was 25m26s).
const maxDays = int(math.MaxInt64 / int64(24*time.Hour))

// goDuration is the syntax time.ParseDuration reads: a string it matches
// but refuses does not fit a time.Duration.
var goDuration = regexp.MustCompile(`^[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$`)

func outOfRange(s string) error {
	return fmt.Errorf("duration %q is out of range: the longest is %dd (%dh, about %d years); write %dd or less",
		s, maxDays, int64(math.MaxInt64)/int64(time.Hour), maxDays/365, maxDays)
}
