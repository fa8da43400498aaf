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
