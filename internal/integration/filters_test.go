package integration

import "github.com/docker/docker/api/types/filters"

func filtersNone() filters.Args { return filters.NewArgs() }
