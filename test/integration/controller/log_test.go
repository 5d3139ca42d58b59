package controller

import (
	"os"

	"go.uber.org/zap/zapcore"
)

// zapLevel keeps controller logs quiet unless GANTRY_TEST_LOG=debug.
func zapLevel() zapcore.Level {
	if os.Getenv("GANTRY_TEST_LOG") == "debug" {
		return zapcore.Level(-2)
	}
	return zapcore.ErrorLevel
}
