//go:build tools

// Package tools pins the Knative Serving command the local runtime runs: queue-proxy.
package tools

import (
	_ "knative.dev/serving/cmd/queue"
)
