//go:build !unix

package agent

const nonBlock = 0
