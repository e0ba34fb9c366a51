package runtime

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/encoding/protowire"
)

// CRIUConfigFile is the CRIU configuration of a container, in its bundle:
// every container's spec names it (CRIUConfigAnnotation), and the engine
// writes it just before a dump or a restore (WriteCRIUConfig) and removes it
// after. runc reads the annotation from the spec it was created with, so a
// dump can only be given settings through a file named at create time.
const CRIUConfigFile = "criu.conf"

// CRIUConfig is what a dump or a restore asks of CRIU beyond runc's own
// options.
type CRIUConfig struct {
	// CgroupRoot, on a restore, puts the processes into this cgroup (see
	// WriteCRIUConfig).
	CgroupRoot string
	// SkipNetworkLock, on a dump, has CRIU leave the network namespace's
	// firewall alone. CRIU's lock (iptables-restore run inside the
	// namespace at the dump, and again at the restore to lift it; 15 to 60
	// ms each here) keeps packets from changing the state of TCP
	// connections while they are dumped: only a dump with
	// --tcp-established has such connections (CRIU refuses others), so the
	// engine skips it for every other dump. The restore follows the method
	// its dump recorded.
	SkipNetworkLock bool
}

// WriteCRIUConfig writes file, a CRIU configuration: the lines of
// defaultCRIUConfig, where the host has one, then c's.
//
// CgroupRoot: on the unified hierarchy runc (1.1) names no cgroup root to
// CRIU; CRIU then puts the processes back into the cgroup they were dumped
// from, which is the right one only when the container is restored under
// the same cgroup path. A container imported, or restored under another
// name, would run in its origin's cgroup (under systemd, a directory no
// unit owns) while its own scope, holding only CRIU, goes away when CRIU
// exits. With cgroup-root CRIU rewrites the dumped root (and the cgroup
// namespace's) to the new one.
func WriteCRIUConfig(file string, c CRIUConfig) error {
	var conf []byte
	if data, err := os.ReadFile(defaultCRIUConfig); err == nil {
		conf = append(data, '\n')
	}
	if c.CgroupRoot != "" {
		conf = append(conf, "cgroup-root "+c.CgroupRoot+"\n"...)
	}
	if c.SkipNetworkLock {
		conf = append(conf, "network-lock skip\n"...)
	}
	return os.WriteFile(file, conf, 0o600)
}

// SkipsNetworkLock tells whether the runtime's CRIU can be told, through a
// configuration file, to skip its network lock. CRIU learnt "skip" in 3.19,
// and up to 4.1.1 at least it crashes when a configuration file given over
// its RPC interface (runc's way) names network-lock at all (parse_options
// reads the command after the options from an argv that is NULL there).
// hack/criu.sh builds a CRIU with that fixed. Rather than trust version
// strings, the engine asks the CRIU it runs, once: a "check" over CRIU's
// RPC with such a file succeeds only where both hold. Only runc is given a
// CRIU path; for another runtime the answer is no.
func (r *Runtime) SkipsNetworkLock() bool {
	r.criuLockOnce.Do(func() {
		if r.name != "runc" {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		criu := r.criuPath
		if criu == "" {
			criu = "criu" // runc's default: criu from PATH
		}
		ok, err := criuConfigSkipsNetworkLock(ctx, criu)
		if err != nil && r.logger != nil {
			r.logger.Debug("CRIU's network-lock probe", "err", err)
		}
		r.criuSkipsLock = ok
	})
	return r.criuSkipsLock
}

// CRIU's RPC (images/rpc.proto): criu_req and criu_opts fields, criu_resp's
// success, the CHECK request type.
const (
	criuReqType          = 1
	criuReqOpts          = 2
	criuOptsImagesDirFD  = 1
	criuOptsLogLevel     = 9
	criuOptsLogFile      = 10
	criuOptsConfigFile   = 51
	criuRespSuccess      = 2
	criuReqTypeCheck     = 3
	criuProbeLogFileName = "probe.log"
)

// criuConfigSkipsNetworkLock runs criu (swrk) and sends it a CHECK request
// whose configuration file says "network-lock skip"; CRIU parses the file
// in a child and answers success only when the parse and its check pass.
func criuConfigSkipsNetworkLock(ctx context.Context, criu string) (bool, error) {
	dir, err := os.MkdirTemp("", "berth-criu-probe-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	conf := filepath.Join(dir, CRIUConfigFile)
	if err := os.WriteFile(conf, []byte("network-lock skip\n"), 0o600); err != nil {
		return false, err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	// Ours non-blocking, so that its reads take the context's deadline
	// (a CRIU that hangs does not hang the engine); CRIU's end blocking.
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return false, err
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "criu-rpc"), os.NewFile(uintptr(fds[1]), "criu-rpc-peer")
	defer ours.Close()
	cmd := exec.CommandContext(ctx, criu, "swrk", "3")
	cmd.ExtraFiles = []*os.File{theirs}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		theirs.Close()
		return false, err
	}
	theirs.Close()
	defer cmd.Wait()
	defer cmd.Process.Kill()

	// CRIU opens the images directory as /proc/CLIENT/fd/N (it readlinks
	// it, so a plain path will not do): the client's descriptor.
	imgs, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer imgs.Close()
	var opts []byte
	opts = protowire.AppendTag(opts, criuOptsImagesDirFD, protowire.VarintType)
	opts = protowire.AppendVarint(opts, uint64(imgs.Fd()))
	opts = protowire.AppendTag(opts, criuOptsLogLevel, protowire.VarintType)
	opts = protowire.AppendVarint(opts, 1)
	opts = protowire.AppendTag(opts, criuOptsLogFile, protowire.BytesType)
	opts = protowire.AppendString(opts, criuProbeLogFileName)
	opts = protowire.AppendTag(opts, criuOptsConfigFile, protowire.BytesType)
	opts = protowire.AppendString(opts, conf)
	var req []byte
	req = protowire.AppendTag(req, criuReqType, protowire.VarintType)
	req = protowire.AppendVarint(req, criuReqTypeCheck)
	req = protowire.AppendTag(req, criuReqOpts, protowire.BytesType)
	req = protowire.AppendBytes(req, opts)
	if deadline, ok := ctx.Deadline(); ok {
		ours.SetDeadline(deadline)
	}
	if _, err := ours.Write(req); err != nil {
		return false, fmt.Errorf("criu swrk: %w (%s)", err, bytes.TrimSpace(stderr.Bytes()))
	}
	buf := make([]byte, 4096)
	n, err := ours.Read(buf)
	if err != nil || n == 0 {
		return false, fmt.Errorf("criu swrk gave no answer: %v (%s)", err, bytes.TrimSpace(stderr.Bytes()))
	}
	success, err := criuRespSucceeded(buf[:n])
	if err != nil {
		return false, err
	}
	if !success {
		log, _ := os.ReadFile(filepath.Join(dir, criuProbeLogFileName))
		return false, fmt.Errorf("criu check with network-lock skip in its configuration failed: %s", bytes.TrimSpace(log))
	}
	return true, nil
}

// criuRespSucceeded reads the success field of a criu_resp message.
func criuRespSucceeded(msg []byte) (bool, error) {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return false, errors.New("criu's answer is no protobuf message")
		}
		msg = msg[n:]
		if num == criuRespSuccess && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(msg)
			if n < 0 {
				return false, errors.New("criu's answer is no protobuf message")
			}
			return v != 0, nil
		}
		n = protowire.ConsumeFieldValue(num, typ, msg)
		if n < 0 {
			return false, errors.New("criu's answer is no protobuf message")
		}
		msg = msg[n:]
	}
	return false, errors.New("criu's answer has no success field")
}

// inventoryMagic heads CRIU's inventory image (images/magic.h), which has
// no common magic before it.
const inventoryMagic = 0x58313116

// inventoryNetworkLock is inventory_entry's network_lock_method field.
const inventoryNetworkLock = 11

// DumpNetworkLock tells how the dump in dir locked the network, as its
// inventory records it (CRIU's NETWORK_LOCK_METHOD): "iptables",
// "nftables" or "skip". A restore follows the same method.
func DumpNetworkLock(dir string) (string, error) {
	file := filepath.Join(dir, Inventory)
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	if len(data) < 8 || binary.LittleEndian.Uint32(data[0:4]) != inventoryMagic {
		return "", fmt.Errorf("%s is not a CRIU inventory image", file)
	}
	size := int(binary.LittleEndian.Uint32(data[4:8]))
	if size > len(data)-8 {
		return "", fmt.Errorf("%s is truncated", file)
	}
	method := uint64(0) // the field's absence: CRIU's default, iptables
	msg := data[8 : 8+size]
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return "", fmt.Errorf("%s: %w", file, protowire.ParseError(n))
		}
		msg = msg[n:]
		if num == inventoryNetworkLock && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(msg)
			if n < 0 {
				return "", fmt.Errorf("%s: %w", file, protowire.ParseError(n))
			}
			method = v
			msg = msg[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, msg); n < 0 {
			return "", fmt.Errorf("%s: %w", file, protowire.ParseError(n))
		}
		msg = msg[n:]
	}
	switch method {
	case 0:
		return "iptables", nil
	case 1:
		return "nftables", nil
	case 2:
		return "skip", nil
	}
	return "", fmt.Errorf("%s: unknown network lock method %d", file, method)
}
