package emulator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A backend's health check, as CreateBackend and UpdateHealthCheck take it
// and the API shows it: its numbers as given, its transient_check_delay in
// the API's own duration format, and one protocol config (tcp_config,
// http_config...), tcp_config {} when none is given.

var healthCheckConfigs = []string{
	"tcp_config", "mysql_config", "pgsql_config", "ldap_config", "redis_config", "http_config", "https_config",
}

func healthCheck(raw json.RawMessage) (map[string]any, *apiError) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, invalidArgumentErr("health_check", "health_check is required")
	}
	var body struct {
		Port                int32   `json:"port"`
		CheckDelay          *int64  `json:"check_delay"`
		CheckTimeout        *int64  `json:"check_timeout"`
		CheckMaxRetries     int32   `json:"check_max_retries"`
		CheckSendProxy      bool    `json:"check_send_proxy"`
		TransientCheckDelay *string `json:"transient_check_delay"`
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, invalidArgumentErr("health_check", "%v", err)
	}
	if err := json.Unmarshal(raw, &all); err != nil {
		return nil, invalidArgumentErr("health_check", "%v", err)
	}
	if body.Port < 1 || body.Port > 65535 {
		return nil, invalidArgumentErr("health_check.port", "port must be between 1 and 65535, got %d", body.Port)
	}
	hc := map[string]any{
		"check_delay": body.CheckDelay, "check_max_retries": body.CheckMaxRetries, "check_send_proxy": body.CheckSendProxy,
		"check_timeout": body.CheckTimeout, "port": body.Port, "transient_check_delay": nil,
	}
	if body.TransientCheckDelay != nil {
		d, err := protoDuration(*body.TransientCheckDelay)
		if err != nil {
			return nil, invalidArgumentErr("health_check.transient_check_delay", "%v", err)
		}
		hc["transient_check_delay"] = d
	}
	for _, k := range healthCheckConfigs {
		if v, ok := all[k]; ok && string(bytes.TrimSpace(v)) != "null" {
			if _, set := hc["config"]; set {
				return nil, invalidArgumentErr("health_check", "only one of %s can be set", strings.Join(healthCheckConfigs, ", "))
			}
			hc[k], hc["config"] = v, true
		}
	}
	if _, set := hc["config"]; !set {
		hc["tcp_config"] = json.RawMessage(`{}`)
	}
	delete(hc, "config")
	return hc, nil
}

// protoDuration reads a duration as the SDK sends it ("0.500000000s") and
// writes it as the API answers it, protobuf's JSON form: 0, 3, 6 or 9
// fractional digits ("0.500s", "4s").
func protoDuration(s string) (string, error) {
	num, ok := strings.CutSuffix(s, "s")
	if !ok {
		return "", fmt.Errorf("%q is not a duration in seconds", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 {
		return "", fmt.Errorf("%q is not a duration in seconds", s)
	}
	d := time.Duration(f*1e9 + 0.5)
	secs, nanos := int64(d/time.Second), int64(d%time.Second)
	switch {
	case nanos == 0:
		return fmt.Sprintf("%ds", secs), nil
	case nanos%1e6 == 0:
		return fmt.Sprintf("%d.%03ds", secs, nanos/1e6), nil
	case nanos%1e3 == 0:
		return fmt.Sprintf("%d.%06ds", secs, nanos/1e3), nil
	}
	return fmt.Sprintf("%d.%09ds", secs, nanos), nil
}
