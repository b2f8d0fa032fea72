//go:build tools

// This module builds KWOK (sigs.k8s.io/kwok), which plays the kubelet of a simulated Node in
// each local SKR: Pods are scheduled (kube-scheduler, built from ../kube's module) and KWOK's
// stages move them to Running and Ready, Jobs' Pods to Succeeded, a labelled Pod to Failed.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
