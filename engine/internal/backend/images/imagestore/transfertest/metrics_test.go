package transfertest

import (
	"bytes"
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/testimage"
)

// TestTransferDurationMetric: every operation is counted by outcome in
// berth_engine_image_transfer_duration_seconds.
func TestTransferDurationMetric(t *testing.T) {
	e := newEnv(t)
	registry := prometheus.NewRegistry()
	if err := e.transfer.RegisterMetrics(registry); err != nil {
		t.Fatal(err)
	}
	if _, err := e.transfer.Load(context.Background(), bytes.NewReader(archive(t, testimage.Docker, testimage.Busybox("localhost/metric:1", "true"))), core.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.transfer.Load(context.Background(), bytes.NewReader([]byte("junk")), core.LoadOptions{}); err == nil {
		t.Fatal("junk loaded")
	}
	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, f := range families {
		if f.GetName() != "berth_engine_image_transfer_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			key := ""
			for _, l := range m.GetLabel() {
				key += l.GetName() + "=" + l.GetValue() + ","
			}
			counts[key] = m.GetHistogram().GetSampleCount()
		}
	}
	if counts["operation=load,result=ok,"] != 1 || counts["operation=load,result=client_error,"] != 1 {
		t.Errorf("load samples by outcome: %v", counts)
	}
}
