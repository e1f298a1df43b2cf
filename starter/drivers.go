package main

import (
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/source"
	"github.com/sluicehq/sluice/internal/target"
)

func init() {
	// Named connections of the configuration file may name any engine this
	// binary links in.
	config.KnownDrivers = func(k config.Kind) []string {
		if k == config.Targets {
			return target.Names()
		}
		return source.Names()
	}
}
