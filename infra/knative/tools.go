//go:build tools

// Package tools pins the Knative Eventing commands the local runtime runs.
package tools

import (
	_ "knative.dev/eventing/cmd/apiserver_receive_adapter"
	_ "knative.dev/eventing/cmd/broker/filter"
	_ "knative.dev/eventing/cmd/broker/ingress"
	_ "knative.dev/eventing/cmd/controller"
	_ "knative.dev/eventing/cmd/in_memory/channel_controller"
	_ "knative.dev/eventing/cmd/in_memory/channel_dispatcher"
	_ "knative.dev/eventing/cmd/mtchannel_broker"
	_ "knative.dev/eventing/cmd/mtping"
	_ "knative.dev/eventing/cmd/webhook"
)
