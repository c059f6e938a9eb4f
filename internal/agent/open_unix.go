//go:build unix

package agent

import "syscall"

// nonBlock keeps an open of a fifo from blocking.
const nonBlock = syscall.O_NONBLOCK
