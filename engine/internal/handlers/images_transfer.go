package handlers

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/berth-project/berth/engine/internal/core"
)

// searchReport is one line of ImagesSearch's answer, in Podman's shape:
// Official and Automated are "[OK]" or empty.
type searchReport struct {
	Index       string
	Name        string
	Description string
	Stars       int
	Official    string
	Automated   string
	Tag         string
}

// searchImages serves ImagesSearch (podman search).
func (s *Server) searchImages(w http.ResponseWriter, r *http.Request) {
	q := struct {
		Term     string              `query:"term"`
		Limit    int                 `query:"limit"`
		Filters  map[string][]string `query:"filters"`
		ListTags bool                `query:"listtags"`
	}{}
	if !foldedQueryInto(w, r, &q) {
		return
	}
	filters, err := core.ParseSearchFilters(q.Filters)
	if err != nil {
		writeError(w, err)
		return
	}
	tlsVerify, auth, ok := registryQueryInto(w, r)
	if !ok {
		return
	}
	found, err := s.deps.Transfer.Search(r.Context(), core.SearchOptions{Term: q.Term, Limit: q.Limit, Filters: filters,
		ListTags: q.ListTags, TLSVerify: tlsVerify, Auth: auth})
	if err != nil {
		writeError(w, err)
		return
	}
	mark := func(b bool) string {
		if b {
			return "[OK]"
		}
		return ""
	}
	out := make([]searchReport, 0, len(found))
	for _, f := range found {
		out = append(out, searchReport{Index: f.Index, Name: f.Name, Description: f.Description, Stars: f.Stars,
			Official: mark(f.Official), Automated: mark(f.Automated), Tag: f.Tag})
	}
	writeJSON(w, http.StatusOK, out)
}

// pullReport is one line of ImagesPull's stream, in Podman's shape. With
// pullProgress every line also carries Podman 6's status ("pulling", then
// "success" or "error" on the last line) and blob lines carry PullProgress;
// the default stream stays Podman 4/5's (no status).
type pullReport struct {
	Status       string        `json:"status,omitempty"`
	Stream       string        `json:"stream,omitempty"`
	Error        string        `json:"error,omitempty"`
	Images       []string      `json:"images,omitempty"`
	ID           string        `json:"id,omitempty"`
	PullProgress *pullProgress `json:"pullProgress,omitempty"`
}

// pullProgress is where one blob of a pull stands: Podman 6's
// ArtifactPullProgress.
type pullProgress struct {
	Status              string `json:"status,omitempty"`
	Current             int64  `json:"current,omitempty"`
	Total               int64  `json:"total,omitempty"`
	ProgressComponentID string `json:"progressComponentID,omitempty"`
}

// pullProgressWords are Podman 6's stream text and blob status of each
// blob step.
var pullProgressWords = map[core.BlobEvent]struct{ stream, status string }{
	core.BlobStarted: {"Starting to pull artifact", "pulling"},
	core.BlobRead:    {"Pulling artifact", "pulling"},
	core.BlobDone:    {"Artifact pulled successfully", "success"},
	core.BlobSkipped: {"Artifact already exists", "skipped"},
}

// pullProgressLine is the stream line of one blob step with pullProgress.
func pullProgressLine(p core.BlobProgress) pullReport {
	words := pullProgressWords[p.Event]
	progress := &pullProgress{Status: words.status, ProgressComponentID: p.Digest}
	if p.Event != core.BlobSkipped {
		progress.Current, progress.Total = p.Current, p.Total
	}
	return pullReport{Status: "pulling", Stream: words.stream, PullProgress: progress}
}

// compatProgress is one line of a Docker-style pull stream (compatMode).
type compatProgress struct {
	Status         string          `json:"status,omitempty"`
	ProgressDetail *compatDetail   `json:"progressDetail,omitempty"`
	ID             string          `json:"id,omitempty"`
	Error          string          `json:"error,omitempty"`
	ErrorDetail    *compatErrorMsg `json:"errorDetail,omitempty"`
}

// compatDetail is a Docker progress object's byte counts.
type compatDetail struct {
	Current int64 `json:"current,omitempty"`
	Total   int64 `json:"total,omitempty"`
}

// compatErrorMsg is a Docker stream's error detail.
type compatErrorMsg struct {
	Message string `json:"message"`
}

// compatStatus is the Docker status word of each blob step.
var compatStatus = map[core.BlobEvent]string{
	core.BlobStarted: "Pulling fs layer",
	core.BlobRead:    "Downloading",
	core.BlobDone:    "Download complete",
	core.BlobSkipped: "Already exists",
}

// shortDigest is the 12 hex digits Docker shows for a layer.
func shortDigest(digest string) string {
	_, hex, _ := strings.Cut(digest, ":")
	if len(hex) > 12 {
		hex = hex[:12]
	}
	return hex
}

// pullImage is ImagesPull (v2): progress lines, then the pulled image IDs.
// compatMode streams Docker's progress objects instead (status, id,
// progressDetail) and ends with Docker's status line; pullProgress streams
// Podman 6's lines (text and each blob's progress, with status), then the
// final report with its status. quiet with either is 400.
func (s *Server) pullImage(w http.ResponseWriter, r *http.Request) {
	q := struct {
		Reference string `query:"reference"`
		Policy    string `query:"policy"`
		AllTags   bool   `query:"alltags"`
		Arch      string `query:"arch"`
		OS        string `query:"os"`
		Variant   string `query:"variant"`
		Quiet     bool   `query:"quiet"`
		Compat    bool   `query:"compatmode"`
		Progress  bool   `query:"pullprogress"`
		// Podman's --retry and --retry-delay.
		Retry      int    `query:"retry"`
		RetryDelay string `query:"retrydelay"`
	}{}
	if !foldedQueryInto(w, r, &q) {
		return
	}
	switch {
	case q.Quiet && q.Compat:
		writeError(w, core.InvalidArgument("compatMode", errors.New("quiet and compatMode cannot be used together")))
		return
	case q.Quiet && q.Progress:
		writeError(w, core.InvalidArgument("pullProgress", errors.New("quiet and pullProgress cannot be used together")))
		return
	case q.Compat && q.Progress:
		writeError(w, core.InvalidArgument("pullProgress", errors.New("compatMode and pullProgress cannot be used together")))
		return
	}
	if q.Reference == "" {
		writeError(w, core.InvalidArgument("reference", errors.New("an image reference is required")))
		return
	}
	policy, err := core.ParsePullPolicy(q.Policy)
	if err != nil {
		writeError(w, err)
		return
	}
	tlsVerify, auth, ok := registryQueryInto(w, r)
	if !ok {
		return
	}
	opts := core.PullOptions{
		Reference: q.Reference,
		Policy:    policy,
		Auth:      auth,
		AllTags:   q.AllTags,
		OS:        q.OS,
		Arch:      q.Arch,
		Variant:   q.Variant,
		TLSVerify: tlsVerify,
	}
	if opts.TransferRetries, err = transferRetries(q.Retry, q.RetryDelay, "retryDelay"); err != nil {
		writeError(w, err)
		return
	}
	stream := newJSONStream(w)
	switch {
	case q.Compat:
		s.pullCompat(w, r, stream, opts)
		return
	case q.Progress:
		opts.Blobs = func(p core.BlobProgress) { stream.send(pullProgressLine(p)) }
		opts.Progress = stream.progress(func(text string) any { return pullReport{Status: "pulling", Stream: text} })
	case !q.Quiet:
		opts.Progress = stream.progress(func(text string) any { return pullReport{Stream: text} })
	}
	ids, err := s.deps.Transfer.Pull(r.Context(), opts)
	if answerUnstreamed(w, stream, err, func() { writeJSON(w, http.StatusOK, pullResult(ids)) }) {
		return
	}
	final := pullResult(ids)
	if err != nil {
		final = pullReport{Error: err.Error()}
	}
	if q.Progress {
		final.Status = "success"
		if err != nil {
			final.Status = "error"
		}
	}
	stream.send(final)
}

// pullCompat runs a pull answered as Docker's progress stream.
func (s *Server) pullCompat(w http.ResponseWriter, r *http.Request, stream *jsonStream, opts core.PullOptions) {
	opts.Blobs = func(p core.BlobProgress) {
		line := compatProgress{Status: compatStatus[p.Event], ID: shortDigest(p.Digest), ProgressDetail: &compatDetail{}}
		if p.Event == core.BlobRead {
			line.ProgressDetail = &compatDetail{Current: p.Current, Total: p.Total}
		}
		stream.send(line)
	}
	stream.send(compatProgress{Status: "Pulling from " + opts.Reference})
	ids, err := s.deps.Transfer.Pull(r.Context(), opts)
	if err != nil {
		stream.send(compatProgress{Error: err.Error(), ErrorDetail: &compatErrorMsg{Message: err.Error()}})
		return
	}
	for _, id := range ids {
		stream.send(compatProgress{Status: "Status: Downloaded newer image for " + opts.Reference, ID: id})
	}
}

func pullResult(ids []string) pullReport {
	report := pullReport{Images: ids}
	if len(ids) > 0 {
		report.ID = ids[len(ids)-1]
	}
	return report
}

// pushReport is one line of PushImage's stream, in Podman's shape; the last
// line of a successful push names the manifest digest (Podman 5; requests
// under /v4.x paths do not get it).
type pushReport struct {
	Stream         string `json:"stream,omitempty"`
	Error          string `json:"error,omitempty"`
	ManifestDigest string `json:"manifestdigest,omitempty"`
}

// pushImage is PushImage: quiet (Podman's default) answers once the push is
// done; otherwise progress lines stream (held until the first blob moves, or
// 5 s) and a failure ends the stream with an error line, or, before any line
// was sent, gets its own status.
func (s *Server) pushImage(w http.ResponseWriter, r *http.Request) {
	q := struct {
		Destination       string `query:"destination"`
		Format            string `query:"format"`
		CompressionFormat string `query:"compressionformat"`
		RemoveSignatures  bool   `query:"removesignatures"`
		Quiet             bool   `query:"quiet"`
		// Podman's --retry and --retry-delay.
		Retry      int    `query:"retry"`
		RetryDelay string `query:"retrydelay"`
	}{Quiet: true}
	if !foldedQueryInto(w, r, &q) {
		return
	}
	tlsVerify, auth, ok := registryQueryInto(w, r)
	if !ok {
		return
	}
	retries, err := transferRetries(q.Retry, q.RetryDelay, "retryDelay")
	if err != nil {
		writeError(w, err)
		return
	}
	opts := core.PushOptions{
		TransferRetries:   retries,
		Destination:       q.Destination,
		Auth:              auth,
		Format:            q.Format,
		CompressionFormat: q.CompressionFormat,
		RemoveSignatures:  q.RemoveSignatures,
		TLSVerify:         tlsVerify,
	}
	source := pathParam(r, "name")
	stream := newJSONStream(w)
	var held *heldLines
	if !q.Quiet {
		// Lines wait for the first blob (the registry answered): a push
		// refused before that gets its status, not a 200 stream.
		held = holdLines(stream)
		opts.Progress = held.progress(func(text string) any { return pushReport{Stream: text} })
		opts.Blobs = func(core.BlobProgress) { held.release() }
	}
	digest, err := s.deps.Transfer.Push(r.Context(), source, opts)
	if held != nil && !held.finish(err != nil) {
		writeError(w, err)
		return
	}
	if q.Quiet && answerUnstreamed(w, stream, err, func() { w.WriteHeader(http.StatusOK) }) {
		return
	}
	if !stream.started() && err != nil {
		writeError(w, err)
		return
	}
	if err != nil {
		stream.send(pushReport{Error: err.Error()})
		return
	}
	if oldFilterForm(chi.URLParam(r, "version")) {
		// Podman 4 clients refuse any line but stream and error.
		if !stream.started() {
			w.WriteHeader(http.StatusOK)
		}
		return
	}
	stream.send(pushReport{ManifestDigest: digest})
}

// loadReport is ImagesLoad's answer.
type loadReport struct {
	Names []string `json:"Names"`
}

// loadImages is ImagesLoad: the body is the archive.
func (s *Server) loadImages(w http.ResponseWriter, r *http.Request) {
	names, err := s.deps.Transfer.Load(r.Context(), r.Body, core.LoadOptions{})
	finishJSON(w, http.StatusOK, loadReport{Names: names}, err)
}

// loadLocalImages is ImagesLocalLoad: the archive is a file on the engine host.
func (s *Server) loadLocalImages(w http.ResponseWriter, r *http.Request) {
	q := struct {
		Path string `query:"path"`
	}{}
	if !queryInto(w, r, &q) {
		return
	}
	names, err := s.deps.Transfer.LoadFile(r.Context(), q.Path)
	finishJSON(w, http.StatusOK, loadReport{Names: names}, err)
}

// importReport is ImagesImport's answer.
type importReport struct {
	ID string `json:"Id"`
}

// importImage is ImagesImport: a rootfs tarball in the body, or fetched from url.
func (s *Server) importImage(w http.ResponseWriter, r *http.Request) {
	q := struct {
		Changes   []string `query:"changes"`
		Message   string   `query:"message"`
		Reference string   `query:"reference"`
		URL       string   `query:"url"`
		OS        string   `query:"os"`
		Arch      string   `query:"architecture"`
		Variant   string   `query:"variant"`
	}{}
	if !queryInto(w, r, &q) {
		return
	}
	opts := core.ImportOptions{
		Changes:   splitChanges(q.Changes),
		Message:   q.Message,
		Reference: q.Reference,
		OS:        q.OS,
		Arch:      q.Arch,
		Variant:   q.Variant,
	}
	var id string
	var err error
	if q.URL != "" {
		id, err = s.deps.Transfer.ImportURL(r.Context(), q.URL, opts)
	} else {
		id, err = s.deps.Transfer.Import(r.Context(), r.Body, opts)
	}
	finishJSON(w, http.StatusOK, importReport{ID: id}, err)
}

// splitChanges accepts changes as repeated parameters and, as Docker's
// clients send them, several changes in one parameter separated by newlines.
func splitChanges(given []string) []string {
	return splitList(given, "\n")
}

// exportImage is ExportImage: one image, oci-archive unless format says otherwise.
func (s *Server) exportImage(w http.ResponseWriter, r *http.Request) {
	q := struct {
		Format   string `query:"format"`
		Compress bool   `query:"compress"`
	}{Format: core.FormatOCIArchive}
	if !queryInto(w, r, &q) {
		return
	}
	s.sendExport(w, r, []string{pathParam(r, "name")}, core.ExportOptions{Format: q.Format, Compress: q.Compress})
}

// exportImages is ExportImages: several images (docker-archive only when more than one).
func (s *Server) exportImages(w http.ResponseWriter, r *http.Request) {
	q := struct {
		References                  []string `query:"references"`
		Format                      string   `query:"format"`
		Compress                    bool     `query:"compress"`
		OCIAcceptUncompressedLayers bool     `query:"ociacceptuncompressedlayers"`
	}{Format: core.FormatOCIArchive}
	if !queryInto(w, r, &q) {
		return
	}
	refs := splitList(q.References, ",")
	if len(refs) == 0 {
		writeError(w, core.InvalidArgument("references", errors.New("at least one image is required")))
		return
	}
	s.sendExport(w, r, refs, core.ExportOptions{Format: q.Format, Compress: q.Compress, OCIAcceptUncompressedLayers: q.OCIAcceptUncompressedLayers})
}

// sendExport streams a finished export as application/x-tar.
func (s *Server) sendExport(w http.ResponseWriter, r *http.Request, names []string, opts core.ExportOptions) {
	archive, err := s.deps.Transfer.Export(r.Context(), names, opts)
	if err != nil {
		writeError(w, err)
		return
	}
	defer archive.Close()
	w.Header().Set("Content-Type", "application/x-tar")
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, archive); err != nil {
		s.logger.Warn("export interrupted", "error", err)
	}
}

// scpReport is ImageScp's answer.
type scpReport struct {
	ID string `json:"Id"`
}

// scpImage is ImageScp: copy to another local name or into another engine.
func (s *Server) scpImage(w http.ResponseWriter, r *http.Request) {
	q := struct {
		Destination string `query:"destination"`
		Quiet       bool   `query:"quiet"`
	}{}
	if !queryInto(w, r, &q) {
		return
	}
	loaded, err := s.deps.Transfer.Scp(r.Context(), pathParam(r, "name"), q.Destination)
	finishJSON(w, http.StatusOK, scpReport{ID: loaded}, err)
}

// transferRetries reads how often a failed pull or push is tried again and
// how long apart (Podman's --retry and --retry-delay; delayName is the
// delay's parameter). Without retry a failure is final; without a delay the
// tries are 2 s apart.
func transferRetries(retry int, delay, delayName string) (core.TransferRetries, error) {
	if retry < 0 {
		return core.TransferRetries{}, core.InvalidArgument("retry", fmt.Errorf("%d is negative", retry))
	}
	r := core.TransferRetries{Retries: retry, RetryDelay: 2 * time.Second}
	if delay != "" {
		d, err := time.ParseDuration(delay)
		if err != nil || d < 0 {
			return core.TransferRetries{}, core.InvalidArgument(delayName, fmt.Errorf("%q is not a duration such as 2s", delay))
		}
		r.RetryDelay = d
	}
	return r, nil
}
