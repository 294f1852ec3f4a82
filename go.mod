module github.com/weftrt/weft

go 1.25.0

require (
	golang.org/x/net v0.55.0
	golang.org/x/sys v0.47.0
)
