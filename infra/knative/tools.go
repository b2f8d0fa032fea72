//go:build tools

// Package tools pins the Knative Eventing commands the local runtime runs.
package tools

import (
	_ "knative.dev/eventing/cmd/apiserver_receive_adapter"
)
