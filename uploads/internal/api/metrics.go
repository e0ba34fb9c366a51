package api

import (
	"context"
	"log/slog"
	"time"

	"github.com/berth-project/berth/uploads/internal/store"
	"github.com/prometheus/client_golang/prometheus"
)

// collectTimeout bounds the database queries of one scrape.
const collectTimeout = 3 * time.Second

// uploadCollector reports the number of uploads by state and the bytes stored, read
// from the database at scrape time so that every replica reports the shared truth.
type uploadCollector struct {
	logger  *slog.Logger
	store   store.Store
	uploads *prometheus.Desc
	bytes   *prometheus.Desc
}

func (c *uploadCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.uploads
	ch <- c.bytes
}

func (c *uploadCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	counts, err := c.store.CountByStatus(ctx)
	if err != nil {
		c.logger.Warn("metrics: counting uploads failed", "err", err)
		ch <- prometheus.NewInvalidMetric(c.uploads, err)
	} else {
		for _, st := range store.Statuses {
			ch <- prometheus.MustNewConstMetric(c.uploads, prometheus.GaugeValue, float64(counts[st]), string(st))
		}
	}
	total, err := c.store.TotalBytes(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.bytes, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(total))
}

// RegisterMetrics adds the uploads metrics to reg: berth_uploads_uploads_in_state{state},
// berth_uploads_stored_bytes and berth_uploads_processing_duration_seconds. It returns
// the function the processor calls with the duration of each finished upload.
func RegisterMetrics(logger *slog.Logger, reg prometheus.Registerer, st store.Store) (observeProcessing func(time.Duration)) {
	const ns = "berth_uploads"
	reg.MustRegister(&uploadCollector{
		logger:  logger,
		store:   st,
		uploads: prometheus.NewDesc(ns+"_uploads_in_state", "Uploads in each state now.", []string{"state"}, nil),
		bytes:   prometheus.NewDesc(ns+"_stored_bytes", "Bytes of files stored in all uploads.", nil, nil),
	})
	hist := prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: ns,
		Name:      "processing_duration_seconds",
		Help:      "Time from claiming an upload to finishing its processing (for the run that finished it).",
		Buckets:   prometheus.ExponentialBuckets(0.01, 4, 10),
	})
	reg.MustRegister(hist)
	return func(d time.Duration) { hist.Observe(d.Seconds()) }
}

// RegisterFileMetrics adds berth_uploads_files_processed_total{kind,outcome}
// to reg and returns the function the processor calls for every file it
// recorded (processor.Config.OnFile).
func RegisterFileMetrics(reg prometheus.Registerer) func(kind, outcome string) {
	files := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "berth_uploads",
		Name:      "files_processed_total",
		Help:      "Files of uploads processed, by kind (image-archive, quadlet, kube, other) and outcome (deployed, failed, unsupported, bundled: sent with the unit that references it).",
	}, []string{"kind", "outcome"})
	reg.MustRegister(files)
	return func(kind, outcome string) { files.WithLabelValues(kind, outcome).Inc() }
}
