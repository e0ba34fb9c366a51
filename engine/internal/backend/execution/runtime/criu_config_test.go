package runtime

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/berth-project/berth/engine/internal/testsupport/criutest"
)

// TestCRIUProbeOfTheNetworkLock asks the CRIU the tests use whether a
// configuration file may say "network-lock skip". hack/criu.sh builds its
// CRIU with the fix that makes the answer yes; a CRIU without "skip" or
// without the fix answers no (Debian 12's 3.17 in the host lab), and a
// CRIU that dies or hangs answers no too, within the deadline.
func TestCRIUProbeOfTheNetworkLock(t *testing.T) {
	criu := criutest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ok, err := criuConfigSkipsNetworkLock(ctx, criu)
	// hack/criu.sh's builds live in criu-VERSION-berthN under its cache.
	built := strings.Contains(filepath.Base(filepath.Dir(criu)), "-berth")
	if built && !ok {
		t.Fatalf("%s is hack/criu.sh's build, with the fix, but the probe says no: %v", criu, err)
	}
	t.Logf("%s: network-lock skip through a configuration file: %v (%v)", criu, ok, err)

	dir := t.TempDir()
	dies := filepath.Join(dir, "criu-dies")
	hangs := filepath.Join(dir, "criu-hangs")
	os.WriteFile(dies, []byte("#!/bin/sh\nexit 139\n"), 0o755)
	os.WriteFile(hangs, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755)
	if ok, err := criuConfigSkipsNetworkLock(ctx, dies); ok || err == nil {
		t.Fatalf("a CRIU that dies: ok=%v err=%v, want no and an error", ok, err)
	}
	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancelShort()
	start := time.Now()
	if ok, err := criuConfigSkipsNetworkLock(short, hangs); ok || err == nil {
		t.Fatalf("a CRIU that hangs: ok=%v err=%v, want no and an error", ok, err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the probe of a hanging CRIU took %v", took)
	}
}

// TestCRIUConfigFile checks the configuration's lines: the host's
// defaults first, then the restore's cgroup root and the dump's lock.
func TestCRIUConfigFile(t *testing.T) {
	dir := t.TempDir()
	defaults := filepath.Join(dir, "runc.conf")
	os.WriteFile(defaults, []byte("tcp-close"), 0o600)
	old := defaultCRIUConfig
	defaultCRIUConfig = defaults
	t.Cleanup(func() { defaultCRIUConfig = old })
	file := filepath.Join(dir, CRIUConfigFile)
	for _, tc := range []struct {
		c    CRIUConfig
		want string
	}{
		{CRIUConfig{}, "tcp-close\n"},
		{CRIUConfig{CgroupRoot: "/system.slice/berth-x.scope"}, "tcp-close\ncgroup-root /system.slice/berth-x.scope\n"},
		{CRIUConfig{SkipNetworkLock: true}, "tcp-close\nnetwork-lock skip\n"},
	} {
		if err := WriteCRIUConfig(file, tc.c); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(file)
		if string(got) != tc.want {
			t.Errorf("%+v: %q, want %q", tc.c, got, tc.want)
		}
	}
}

// TestDumpNetworkLock reads the method from inventory images as CRIU
// writes them: the field absent (iptables), nftables, skip; and refuses
// what is no inventory.
func TestDumpNetworkLock(t *testing.T) {
	image := func(method int) []byte {
		var msg []byte
		msg = protowire.AppendTag(msg, 1, protowire.VarintType) // img_version
		msg = protowire.AppendVarint(msg, 2)
		msg = protowire.AppendTag(msg, 10, protowire.VarintType) // tcp_close
		msg = protowire.AppendVarint(msg, 0)
		if method >= 0 {
			msg = protowire.AppendTag(msg, inventoryNetworkLock, protowire.VarintType)
			msg = protowire.AppendVarint(msg, uint64(method))
		}
		msg = protowire.AppendTag(msg, 13, protowire.BytesType) // dump_criu_run_id
		msg = protowire.AppendString(msg, "3e6ff2be")
		out := binary.LittleEndian.AppendUint32(nil, inventoryMagic)
		out = binary.LittleEndian.AppendUint32(out, uint32(len(msg)))
		return append(out, msg...)
	}
	for _, tc := range []struct {
		data []byte
		want string
	}{
		{image(-1), "iptables"}, {image(0), "iptables"}, {image(1), "nftables"}, {image(2), "skip"},
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, Inventory), tc.data, 0o600)
		got, err := DumpNetworkLock(dir)
		if err != nil || got != tc.want {
			t.Errorf("got %q, %v; want %q", got, err, tc.want)
		}
	}
	for name, data := range map[string][]byte{
		"not an inventory": []byte("hello world, no image"),
		"truncated":        image(2)[:12],
		"unknown method":   image(7),
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, Inventory), data, 0o600)
		if got, err := DumpNetworkLock(dir); err == nil {
			t.Errorf("%s: got %q, want an error", name, got)
		}
	}
}
