//go:build tools

// This module builds Prometheus (github.com/prometheus/prometheus, cmd/prometheus), which
// the monitoring test runs against the real local stack: it discovers the functions' Pods
// through the scrape job operators deploy (monitoring/prometheus-scrape.yaml), scrapes them
// and evaluates the alert rules (monitoring/prometheusrule.yaml) as a cluster's would.
package tools

import _ "github.com/prometheus/prometheus/cmd/prometheus"
