package engine

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-project/berth/engine/internal/backend/images/imagestore"
)

// imageStoreCollector reports the number of images and the bytes the image
// store holds (shared layers counted once), read at scrape time.
type imageStoreCollector struct {
	store  *imagestore.Store
	images *prometheus.Desc
	bytes  *prometheus.Desc
}

// registerImageMetrics adds berth_engine_images and berth_engine_image_store_bytes.
func registerImageMetrics(registry *prometheus.Registry, store *imagestore.Store) error {
	return registry.Register(&imageStoreCollector{
		store:  store,
		images: prometheus.NewDesc("berth_engine_images", "Images in the engine's store.", nil, nil),
		bytes:  prometheus.NewDesc("berth_engine_image_store_bytes", "Bytes of image layers and metadata in the store, shared layers counted once.", nil, nil),
	})
}

// Describe implements prometheus.Collector.
func (c *imageStoreCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.images
	ch <- c.bytes
}

// Collect implements prometheus.Collector.
func (c *imageStoreCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	images, bytes, err := c.store.Stats(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.images, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.images, prometheus.GaugeValue, float64(images))
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(bytes))
}
