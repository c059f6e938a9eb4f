#!/bin/bash
git status --porcelain 2>/dev/null | head -50
