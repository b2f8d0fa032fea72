//go:build tools

// Package tools pins Gardener's resource-manager, the peer the benchmark runs side by side.
package tools

import _ "github.com/gardener/gardener/cmd/gardener-resource-manager"
