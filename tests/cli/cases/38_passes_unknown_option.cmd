passes --markdwn
