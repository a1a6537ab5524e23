ops extra
