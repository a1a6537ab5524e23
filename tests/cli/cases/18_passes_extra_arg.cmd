passes extra
