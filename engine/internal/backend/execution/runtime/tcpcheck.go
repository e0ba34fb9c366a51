package runtime

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// tcpStatesNeedingEstablished are the TCP states (as /proc/net/tcp writes
// them) of a socket CRIU dumps only with --tcp-established: connected, or
// connecting, or closing with a peer.
var tcpStatesNeedingEstablished = map[string]string{
	"01": "ESTABLISHED", "02": "SYN_SENT", "04": "FIN_WAIT1", "05": "FIN_WAIT2",
	"08": "CLOSE_WAIT", "09": "LAST_ACK", "0B": "CLOSING",
}

// ConnectedTCP lists the TCP sockets processes pids hold that CRIU would
// refuse to dump without --tcp-established ("local port P, remote port R
// (STATE)"). Checked before a dump, it refuses such a checkpoint without
// letting CRIU seize, infect and resume the container's processes first:
// a failed dump is not harmless (on Debian 13, CRIU 4.1.1 and kernel
// 6.12, processes it interrupted in a sleep or a poll returned early when
// it let go of them, docs/engine/checkpoint.md). Sockets of processes
// that are gone meanwhile are skipped; what cannot be read is no answer.
func ConnectedTCP(pids []int) []string {
	inodes := map[string]bool{}
	nets := map[string]int{} // network namespace -> a pid in it
	for _, pid := range pids {
		p := "/proc/" + strconv.Itoa(pid)
		fds, err := os.ReadDir(p + "/fd")
		if err != nil {
			continue
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(p, "fd", fd.Name()))
			if err == nil && strings.HasPrefix(link, "socket:[") {
				inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
			}
		}
		if ns, err := os.Readlink(p + "/ns/net"); err == nil {
			if _, ok := nets[ns]; !ok {
				nets[ns] = pid
			}
		}
	}
	if len(inodes) == 0 {
		return nil
	}
	var out []string
	for _, pid := range nets {
		for _, table := range []string{"tcp", "tcp6"} {
			out = append(out, connectedIn(fmt.Sprintf("/proc/%d/net/%s", pid, table), inodes)...)
		}
	}
	return out
}

// connectedIn reads one /proc/net/tcp table: the sockets of inodes in a
// state of tcpStatesNeedingEstablished.
func connectedIn(file string, inodes map[string]bool) []string {
	f, err := os.Open(file)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || !inodes[fields[9]] {
			continue
		}
		state, ok := tcpStatesNeedingEstablished[fields[3]]
		if !ok {
			continue
		}
		out = append(out, fmt.Sprintf("local port %d, remote port %d (%s)", hexPort(fields[1]), hexPort(fields[2]), state))
	}
	return out
}

// hexPort is the port of an ADDR:PORT of /proc/net/tcp (hexadecimal).
func hexPort(addr string) uint64 {
	_, port, _ := strings.Cut(addr, ":")
	n, _ := strconv.ParseUint(port, 16, 16)
	return n
}
