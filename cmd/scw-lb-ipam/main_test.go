package main

import (
	"context"
	"strings"
	"testing"
)

func TestRunUnknownCommand(t *testing.T) {
	if err := run(context.Background(), []string{"frobnicate"}); err == nil || !strings.Contains(err.Error(), `unknown command "frobnicate"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestRunVersion(t *testing.T) {
	if err := run(context.Background(), []string{"version"}); err != nil {
		t.Fatal(err)
	}
}

// TestRunPreflightDispatch: "preflight" reaches its own flags (and their
// error), not the unknown-command path.
func TestRunPreflightDispatch(t *testing.T) {
	if err := run(context.Background(), []string{"preflight", "-o", "yaml"}); err == nil || !strings.Contains(err.Error(), `-o "yaml": use table or json`) {
		t.Fatalf("err = %v", err)
	}
}
