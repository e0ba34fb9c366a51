package network

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// addrAssignSet is the kernel's NET_ADDR_SET: the interface's hardware
// address was chosen by user space (/sys/class/net/NAME/addr_assign_type).
const addrAssignSet = "3"

// pinBridgeMAC fixes a bridge's hardware address at its current value.
//
// A Linux bridge whose address nobody set takes the lowest address of its
// ports, so it changes whenever a container's veth with a lower address
// joins it. Containers that already talk to the gateway keep the old
// address in their ARP cache; the bridge hands their frames to the host as
// meant for another host, and the kernel drops them until the ARP entry
// expires (30 s and more). That is how a live connect made aardvark-dns,
// which listens on the gateway, unreachable for the containers already on
// the network. netavark 1.4 creates its bridges that way (later netavark
// releases set the address themselves); setting the address once, right
// after the first setup on a bridge, keeps it for the bridge's lifetime.
func pinBridgeMAC(bridge string) error {
	sys := filepath.Join("/sys/class/net", bridge)
	kind, err := os.ReadFile(filepath.Join(sys, "addr_assign_type"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bridge %s: %w", bridge, err)
	}
	if strings.TrimSpace(string(kind)) == addrAssignSet {
		return nil
	}
	text, err := os.ReadFile(filepath.Join(sys, "address"))
	if err != nil {
		return fmt.Errorf("bridge %s: %w", bridge, err)
	}
	mac, err := net.ParseMAC(strings.TrimSpace(string(text)))
	if err != nil || len(mac) != 6 {
		return fmt.Errorf("bridge %s: address %q: %v", bridge, text, err)
	}
	if err := setHardwareAddr(bridge, mac); err != nil {
		return fmt.Errorf("pin the address of bridge %s: %w", bridge, err)
	}
	return nil
}

// setHardwareAddr sets an Ethernet interface's address (SIOCSIFHWADDR),
// which also marks it as set by user space.
func setHardwareAddr(name string, mac net.HardwareAddr) error {
	if len(name) >= unix.IFNAMSIZ {
		return fmt.Errorf("interface name %q too long", name)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	// struct ifreq: the name, then struct sockaddr {sa_family, sa_data}.
	var req struct {
		name   [unix.IFNAMSIZ]byte
		family uint16
		data   [14]byte
		_      [8]byte
	}
	copy(req.name[:], name)
	req.family = unix.ARPHRD_ETHER
	copy(req.data[:], mac)
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCSIFHWADDR, uintptr(unsafe.Pointer(&req))); errno != 0 {
		return errno
	}
	return nil
}
