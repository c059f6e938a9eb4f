package sdk

import "strings"

func bytesReader(s string) *strings.Reader { return strings.NewReader(s) }
