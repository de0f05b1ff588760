package main

import dto "github.com/prometheus/client_model/go"

func mapValues(m map[string]*dto.MetricFamily) []*dto.MetricFamily {
	out := make([]*dto.MetricFamily, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
