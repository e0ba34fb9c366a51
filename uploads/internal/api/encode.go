package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/berth-project/berth/uploads/internal/store"
)

// writeJSON answers status with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// uploadJSON is the wire form of an upload; the processing fields appear from
// processing on.
type uploadJSON struct {
	UUID           string    `json:"uuid"`
	Status         string    `json:"status"`
	CreatedAt      time.Time `json:"createdAt"`
	UpdatedAt      time.Time `json:"updatedAt"`
	FilesTotal     *int      `json:"filesTotal,omitempty"`
	FilesProcessed *int      `json:"filesProcessed,omitempty"`
	Errors         *int      `json:"errors,omitempty"`
	Images         *int      `json:"images,omitempty"`
}

func toJSON(u store.Upload) uploadJSON {
	out := uploadJSON{UUID: u.ID.String(), Status: string(u.Status), CreatedAt: u.CreatedAt, UpdatedAt: u.UpdatedAt}
	if u.Status == store.StatusProcessing || u.Status == store.StatusDone {
		total := 0
		if u.FilesTotal != nil {
			total = *u.FilesTotal
		}
		processed, errs, images := u.FilesProcessed, u.Errors, u.Images
		out.FilesTotal, out.FilesProcessed, out.Errors, out.Images = &total, &processed, &errs, &images
	}
	return out
}

// page is a validated limit/offset pair.
type page struct{ limit, offset int }

// parsePage reads ?limit= (1..max, default def) and ?offset= (>= 0, default 0).
func parsePage(r *http.Request, def, max int) (page, error) {
	p := page{limit: def}
	q := r.URL.Query()
	if v := q.Get("limit"); v != "" || q.Has("limit") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > max {
			return page{}, badQuery("limit", v, fmt.Sprintf("an integer from 1 to %d", max))
		}
		p.limit = n
	}
	if v := q.Get("offset"); v != "" || q.Has("offset") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return page{}, badQuery("offset", v, "an integer >= 0")
		}
		p.offset = n
	}
	return p, nil
}

func badQuery(name, value, want string) error {
	return &requestError{status: http.StatusBadRequest, slug: "invalid-query", title: "Invalid query parameter",
		detail: fmt.Sprintf("%s=%q: want %s", name, value, want), extra: map[string]any{"parameter": name}}
}

// setPagination writes the Pagination-* headers of a page.
func setPagination(w http.ResponseWriter, p page, count, total int) {
	h := w.Header()
	h.Set("Pagination-Count", strconv.Itoa(count))
	h.Set("Pagination-Offset", strconv.Itoa(p.offset))
	h.Set("Pagination-Limit", strconv.Itoa(p.limit))
	h.Set("Pagination-Total", strconv.Itoa(total))
}
