package app

import (
	"context"
	"log/slog"

	"github.com/pixie-dev/pixie/internal/channel/lark"
	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/store"
)

// newLarkChannel builds the Lark channel from the configuration. Its credentials live in the
// home's credentials file; a missing binding is not an error (the channel is then unavailable
// and its status says why).
func newLarkChannel(ctx context.Context, cfg config.Config, log *slog.Logger, st *store.Store, m model.Model, secrets lark.Secrets) (*lark.Channel, error) {
	ws := cfg.Lark.DefaultWorkspace
	if ws != "" {
		var err error
		if ws, err = config.ExpandPath(ws); err != nil {
			return nil, err
		}
	}
	return lark.New(ctx, lark.Config{
		Store:            st,
		Enabled:          cfg.Lark.Enabled,
		BaseURL:          cfg.Lark.BaseURL,
		DefaultWorkspace: ws,
		ReplayWindow:     cfg.Lark.ReplayWindow,
		Home:             cfg.Home,
		Model:            m,
		Secrets:          secrets,
		Logger:           log.With("component", "lark"),
	})
}
