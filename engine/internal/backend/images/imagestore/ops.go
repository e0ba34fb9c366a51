package imagestore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/containers/image/v5/docker/reference"
	"github.com/containers/storage"
	units "github.com/docker/go-units"

	"github.com/berth-project/berth/engine/internal/core"
)

// Resolve implements core.Images: the names a reference is looked up as, in order.
func (s *Store) Resolve(ctx context.Context, name string) ([]string, error) {
	ref, err := ParseReference(name)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range s.candidates(ref) {
		out = append(out, c.String())
	}
	return out, nil
}

// History implements core.Images: the image's build steps, newest first, each
// with the size of the layer it made and the local image whose top layer that is.
func (s *Store) History(ctx context.Context, nameOrID string) ([]core.ImageHistoryEntry, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	img, err := s.findNamed(nameOrID)
	if err != nil {
		return nil, err
	}
	rawManifest, mimeType := s.readManifest(img)
	cfg, err := s.readConfig(img, rawManifest, mimeType)
	if err != nil {
		return nil, err
	}
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	byTopLayer := map[string][]*imageView{}
	for _, v := range snap.views {
		byTopLayer[v.img.TopLayer] = append(byTopLayer[v.img.TopLayer], v)
	}
	layer := snap.layerByID[img.TopLayer]
	used := map[string]bool{}
	out := make([]core.ImageHistoryEntry, 0, len(cfg.History))
	for i := len(cfg.History) - 1; i >= 0; i-- {
		h := cfg.History[i]
		entry := core.ImageHistoryEntry{ID: "<missing>", CreatedBy: h.CreatedBy, Comment: h.Comment}
		if h.Created != nil {
			entry.Created = *h.Created
		}
		if layer != nil {
			// Like Podman, the tags shown are the layer's own names.
			entry.Tags = layer.Names
			if !h.EmptyLayer {
				entry.Size = layer.UncompressedSize
			}
			if owners := byTopLayer[layer.ID]; len(owners) > 0 && !used[owners[0].img.ID] {
				entry.ID = owners[0].img.ID
				used[owners[0].img.ID] = true
			}
			if !h.EmptyLayer {
				layer = snap.layerByID[layer.Parent]
			}
		}
		out = append(out, entry)
	}
	return out, nil
}

// Tree implements core.Images: the image's layers base first, as Podman draws
// them, or with whatRequires the layers of every image built on this one.
func (s *Store) Tree(ctx context.Context, nameOrID string, whatRequires bool) (string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	img, err := s.findNamed(nameOrID)
	if err != nil {
		return "", err
	}
	snap, err := s.snapshot()
	if err != nil {
		return "", err
	}
	tagsOf := map[string][]string{}
	childrenOf := map[string][]string{}
	for _, v := range snap.views {
		if v.img.TopLayer != "" {
			tagsOf[v.img.TopLayer] = append(tagsOf[v.img.TopLayer], repoTags(v.img.Names)...)
		}
	}
	// Children in the store's order, as Podman walks its layer tree.
	for _, layer := range snap.layers {
		childrenOf[layer.Parent] = append(childrenOf[layer.Parent], layer.ID)
	}
	describeLayer := func(id string) string {
		layer := snap.layerByID[id]
		text := fmt.Sprintf("ID: %s Size: %7v", shortID(id), units.HumanSizeWithPrecision(float64(layer.UncompressedSize), 4))
		if tags := tagsOf[id]; len(tags) > 0 {
			text += fmt.Sprintf(" Top Layer of: %s", tags)
		}
		return text
	}

	size := snap.byID[img.ID].entry.size
	header := fmt.Sprintf("Image ID: %s\nTags:     %s\nSize:     %v\n", shortID(img.ID), repoTags(img.Names), units.HumanSizeWithPrecision(float64(size), 4))
	if img.TopLayer != "" {
		header += "Image Layers"
	} else {
		header += "No Image Layers"
	}
	root := &treeNode{text: header}
	if whatRequires {
		if img.TopLayer != "" && snap.layerByID[img.TopLayer] != nil {
			addSubtree(root, img.TopLayer, childrenOf, describeLayer, snap.layerByID)
		}
		return root.String(), nil
	}
	chain := layerChain(img.TopLayer, snap.layerByID)
	for i := len(chain) - 1; i >= 0; i-- {
		if snap.layerByID[chain[i]] == nil {
			continue
		}
		root.children = append(root.children, &treeNode{text: describeLayer(chain[i])})
	}
	return root.String(), nil
}

// addSubtree adds layer id and its descendants under parent: a chain of only
// children stays flat, siblings branch.
func addSubtree(parent *treeNode, id string, childrenOf map[string][]string, describe func(string) string, layers map[string]*storage.Layer) {
	node := &treeNode{text: describe(id)}
	parentOf := layers[id].Parent
	if parentOf == "" || len(childrenOf[parentOf]) <= 1 {
		parent.children = append(parent.children, node)
		node = parent
	} else {
		parent.children = append(parent.children, node)
	}
	for _, child := range childrenOf[id] {
		addSubtree(node, child, childrenOf, describe, layers)
	}
}

// treeNode renders a tree the way Podman's image tree does.
type treeNode struct {
	text     string
	children []*treeNode
}

// String draws the node and its children with box-drawing branches.
func (n *treeNode) String() string {
	var b strings.Builder
	b.WriteString(n.text)
	b.WriteString("\n")
	n.writeChildren(&b, "")
	return b.String()
}

func (n *treeNode) writeChildren(b *strings.Builder, indent string) {
	for i, child := range n.children {
		last := i == len(n.children)-1
		branch, cont := "├── ", "│   "
		if last {
			branch, cont = "└── ", "    "
		}
		lines := strings.Split(child.text, "\n")
		b.WriteString(indent + branch + lines[0] + "\n")
		for _, line := range lines[1:] {
			b.WriteString(indent + cont + line + "\n")
		}
		child.writeChildren(b, indent+cont)
	}
}

// normalizeTag turns repo and tag into the name stored: short names go under
// localhost/, a missing tag is "latest". A digested name is refused.
func normalizeTag(repo, tag string) (string, error) {
	if repo == "" {
		return "", core.InvalidArgument("repo", errors.New("repository name is required"))
	}
	if tag == "" {
		tag = "latest"
	}
	name := repo + ":" + tag
	if strings.Contains(repo, "@") {
		return "", core.InvalidArgument("repo", fmt.Errorf("%q: a tag cannot be added to a digested reference", repo))
	}
	if !hasDomain(name) {
		name = "localhost/" + name
	}
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return "", core.InvalidArgument("tag", fmt.Errorf("%q: %w", repo+":"+tag, err))
	}
	if _, ok := named.(reference.Tagged); !ok {
		return "", core.InvalidArgument("tag", fmt.Errorf("%q has no tag", name))
	}
	return named.String(), nil
}

// normalizeName turns a name given for untagging into the stored form.
func normalizeName(name string) (string, error) {
	full := name
	if !hasDomain(full) {
		full = "localhost/" + full
	}
	named, err := reference.ParseNormalizedNamed(full)
	if err != nil {
		return "", core.InvalidArgument("tag", fmt.Errorf("%q: %w", name, err))
	}
	return reference.TagNameOnly(named).String(), nil
}

// Tag implements core.Images. A name held by another image moves to this one.
func (s *Store) Tag(ctx context.Context, nameOrID, repo, tag string) error {
	name, err := normalizeTag(repo, tag)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	img, err := s.findNamed(nameOrID)
	if err != nil {
		return err
	}
	if slices.Contains(img.Names, name) {
		return nil
	}
	// New names go last, as Podman orders them.
	if err := s.store.SetNames(img.ID, append(slices.Clone(img.Names), name)); err != nil {
		return fmt.Errorf("tagging image %s as %s: %w", shortID(img.ID), name, err)
	}
	s.emit(ctx, "tag", img.ID, name)
	return nil
}

// Untag implements core.Images. With no names every name is removed; a name
// the image does not have is an ErrInvalidArgument.
func (s *Store) Untag(ctx context.Context, nameOrID string, names []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	img, err := s.findNamed(nameOrID)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		if len(img.Names) == 0 {
			return nil
		}
		if err := s.store.RemoveNames(img.ID, img.Names); err != nil {
			return fmt.Errorf("untagging image %s: %w", shortID(img.ID), err)
		}
		for _, name := range img.Names {
			s.emit(ctx, "untag", img.ID, name)
		}
		return nil
	}
	var remove []string
	for _, given := range names {
		name, err := normalizeName(given)
		if err != nil {
			return err
		}
		if !slices.Contains(img.Names, name) {
			return core.InvalidArgument("tag", fmt.Errorf("%s is not a name of image %s", name, shortID(img.ID)))
		}
		remove = append(remove, name)
	}
	if err := s.store.RemoveNames(img.ID, remove); err != nil {
		return fmt.Errorf("untagging image %s: %w", shortID(img.ID), err)
	}
	for _, name := range remove {
		s.emit(ctx, "untag", img.ID, name)
	}
	return nil
}
