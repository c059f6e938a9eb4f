//go:build !linux

package loadbench

import "errors"

// PinDriver is Linux-only.
func PinDriver(string) error { return errors.New("pinning the driver needs Linux") }

func driverCPUs() string { return "" }

func rssMiB(int) (float64, error) { return 0, errors.New("RSS needs Linux's /proc") }

func rssPartsMiB(int) (float64, float64, error) { return 0, 0, errors.New("RSS needs Linux's /proc") }
