module github.com/weftrt/weft

go 1.25.0
