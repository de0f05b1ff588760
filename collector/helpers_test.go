package collector

import (
	"io"
	"log/slog"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

func slogDiscard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func writeText(w io.Writer, mf *dto.MetricFamily) error {
	_, err := expfmt.MetricFamilyToText(w, mf)
	return err
}
