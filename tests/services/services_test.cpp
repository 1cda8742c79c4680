int placeholder_services;
