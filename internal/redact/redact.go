// Package redact hides the passwords of database URLs: in what `pixie config` prints, in logs,
// in /v1/info and in error messages. It depends on the standard library only.
package redact

import (
	"net/url"
	"regexp"
	"strings"
	"sync"
)

// Mask replaces a password.
const Mask = "xxxxx"

var (
	kvPassword = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`) })
	userInfo   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(://[^:/@]*:)[^@]*@`) })
)

// URL returns a connection URL (scheme://user:password@host/db?password=…) or keyword/value
// string (host=… password=…) with its password replaced by Mask. A URL that does not parse is
// masked by pattern.
func URL(raw string) string {
	if !strings.Contains(raw, "://") {
		return kvPassword().ReplaceAllString(raw, "${1}"+Mask)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return kvPassword().ReplaceAllString(userInfo().ReplaceAllString(raw, "${1}"+Mask+"@"), "${1}"+Mask)
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), Mask)
		}
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", Mask)
		u.RawQuery = q.Encode()
	}
	return strings.Replace(u.String(), ":"+url.PathEscape(Mask)+"@", ":"+Mask+"@", 1)
}

// Password extracts the password of a URL or keyword/value string, best effort ("" if none).
func Password(raw string) string {
	if strings.Contains(raw, "://") {
		if u, err := url.Parse(raw); err == nil {
			if u.User != nil {
				if p, ok := u.User.Password(); ok {
					return p
				}
			}
			return u.Query().Get("password")
		}
	}
	if m := kvPassword().FindStringSubmatch(raw); m != nil {
		return strings.Trim(m[2], "'")
	}
	return ""
}

// Scrub removes every occurrence of secret (and of its URL-escaped form) from s.
func Scrub(s, secret string) string {
	if secret == "" {
		return s
	}
	s = strings.ReplaceAll(s, secret, Mask)
	for _, esc := range []string{url.QueryEscape(secret), url.PathEscape(secret)} {
		if esc != secret {
			s = strings.ReplaceAll(s, esc, Mask)
		}
	}
	return s
}
